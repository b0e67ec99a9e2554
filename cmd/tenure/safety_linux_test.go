package main

// Work under a lease ends within the lease (S9), against the worst: a
// holder cut off from Redis, a killed tenure, a takeover found at the
// release, and leftovers in the command's group.

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/tests/redistest"
)

// These tests check S9 (work under a lease ends within the lease) from the
// outside, by order rather than by the clock: the second holder's command,
// when it starts, looks in /proc for any live process of the first
// command's process group and writes what it finds before its start marker.

// stubborn is a command that ignores SIGTERM, and so does the grandchild it
// starts (an ignored signal stays ignored across fork and exec): only
// SIGKILL ends them. It writes "PID GRANDCHILD-PID" to $1.
const stubborn = `trap "" TERM; sleep 300 & echo $$ $! > "$1"; wait`

// lookout, run as the next holder's command, appends "alive PID STATE" to
// $2 for every process of group $1 that is neither gone nor a zombie (a
// killed orphan may wait for a reaper that a container lacks), then
// "started".
const lookout = `pg=$1 out=$2
for f in /proc/[0-9]*/stat; do
  set -- $(sed 's/.*) //' "$f" 2>/dev/null)
  if [ "$3" = "$pg" ] && [ "$1" != Z ]; then p=${f#/proc/}; echo "alive ${p%/stat} $1" >> "$out"; fi
done
echo started >> "$out"`

// startStubborn starts c (a tenure running stubborn with pidFile as $1) and
// returns the command's process group and the pids it recorded. Whatever
// happens, those pids are killed at the end of the test.
func startStubborn(t *testing.T, c *exec.Cmd, pidFile string) (pgid int, pids []int) {
	t.Helper()
	// A grandchild that outlives tenure (the failures looked for) holds
	// tenure's output pipes: Wait must not wait for it.
	c.WaitDelay = 5 * time.Second
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c.ProcessState == nil {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	})
	for _, f := range strings.Fields(waitFile(t, pidFile, 1, 10*time.Second)[0]) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file: %v", err)
		}
		pids = append(pids, pid)
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
	if len(pids) != 2 {
		t.Fatalf("pid file has %v, want the command's and the grandchild's pids", pids)
	}
	pgid, err := syscall.Getpgid(pids[0])
	if err != nil {
		t.Fatal(err)
	}
	if g, err := syscall.Getpgid(pids[1]); err != nil || g != pgid {
		t.Fatalf("the grandchild is in group %d (%v), the command in %d", g, err, pgid)
	}
	return pgid, pids
}

// checkLookout reads what lookout wrote: it must have started, and found
// nothing of group pgid alive.
func checkLookout(t *testing.T, out string, pgid int) {
	t.Helper()
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the second holder's command left no trace: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if lines[len(lines)-1] != "started" {
		t.Fatalf("the second holder's command did not finish its check:\n%s", data)
	}
	if len(lines) > 1 {
		t.Errorf("the second holder's command started while the first's group %d still ran:\n%s", pgid, data)
	}
}

// waitGone polls until no process of group pgid is alive.
func waitGone(t *testing.T, pgid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for live := liveInGroup(pgid); len(live) > 0; live = liveInGroup(pgid) {
		if time.Now().After(deadline) {
			t.Fatalf("group %d still has live processes after %v: %v", pgid, within, live)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCutOffHolderStopsBeforeExpiry: a holder cut off from Redis (a black
// hole: renewals time out) stops a command that ignores SIGTERM, and its
// grandchild, before the key expires on the server: the test, polling the
// key, finds none of them alive the moment it is gone, and a second
// holder's command, started as soon as it could get the name, finds none
// either. Before the fix, the first holder sent SIGTERM at its local
// deadline and SIGKILL --grace after it, so both found them running.
func TestCutOffHolderStopsBeforeExpiry(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	dir := t.TempDir()
	pidFile, out := filepath.Join(dir, "pids"), filepath.Join(dir, "out")
	proxy := redistest.StartProxy(t, srv.Addr())
	var stderrA bytes.Buffer
	a := tenure("--redis", "redis://"+proxy.Addr(), "run", "--ttl", "1s", "cutoff", "--", "sh", "-c", stubborn, "sh", pidFile)
	a.Stderr = &stderrA
	pgid, pids := startStubborn(t, a, pidFile)

	proxy.BlackHole(true)
	// Polled every millisecond or so, Redis's lazy expiry on access makes
	// the key vanish at its expiry to within that.
	for bound := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if n, err := c.Exists(ctx, "tenure:{cutoff}").Result(); err == nil && n == 0 {
			break
		}
		if time.Now().After(bound) {
			t.Fatal("the cut-off holder's key never expired")
		}
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d of the cut-off holder's command ran on when its key expired on the server", pid)
		}
	}

	b := tenure("run", "--ttl", "5s", "cutoff", "--", "sh", "-c", lookout, "sh", strconv.Itoa(pgid), out)
	if code, _, stderr := result(t, b); code != 0 {
		t.Fatalf("the second holder exited %d: %s", code, stderr)
	}
	checkLookout(t, out, pgid)
	// The first one's release goes into the black hole and times out.
	if code := exitOf(t, a, 30*time.Second); code != exitLost {
		t.Errorf("the cut-off holder exited %d, want %d; stderr: %s", code, exitLost, stderrA.String())
	}
	if !strings.Contains(stderrA.String(), "has not confirmed a renewal of the lease in time (unreachable, slow or paused)") {
		t.Errorf("the cut-off holder did not say why it stopped the command: %s", stderrA.String())
	}
	waitGone(t, pgid, 10*time.Second)
}

// TestKilledTenureTakesGroup: SIGKILL to tenure (run or elect) takes the
// command's whole group with it before the lease expires: the next
// holder's command finds none of it alive. Before the guard, the command
// and its grandchild ran on with nobody holding the lease.
func TestKilledTenureTakesGroup(t *testing.T) {
	for _, tc := range []struct {
		cmd   string
		first []string
		next  []string
	}{
		{"run", []string{"run", "--ttl", "2s"}, []string{"run"}},
		{"elect", []string{"elect", "--ttl", "2s", "--identity", "A"}, []string{"elect", "--identity", "B"}},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			dir := t.TempDir()
			pidFile, out := filepath.Join(dir, "pids"), filepath.Join(dir, "out")
			name := "killed-" + tc.cmd
			a := tenure(append(tc.first, name, "--", "sh", "-c", stubborn, "sh", pidFile)...)
			pgid, _ := startStubborn(t, a, pidFile)
			if err := a.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = a.Wait()
			b := tenure(append(tc.next, name, "--", "sh", "-c", lookout, "sh", strconv.Itoa(pgid), out)...)
			if code, _, stderr := result(t, b); code != 0 {
				t.Fatalf("the next holder exited %d: %s", code, stderr)
			}
			checkLookout(t, out, pgid)
			waitGone(t, pgid, 10*time.Second)
		})
	}
}

// TestTakeoverFoundAtRelease: the command exits 0, but meanwhile another
// token took the key, between renewals (TTL 30s: none comes before the
// command ends). tenure must exit 77, not with the command's 0. "run"
// learns it from Release's error (errors.Is(err, lease.ErrLost), which
// needs the library's change for issue 12 item 4); "elect" from a guarded
// read before it resigns.
func TestTakeoverFoundAtRelease(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		args []string
	}{
		{"run", []string{"run", "--ttl", "30s"}},
		{"elect", []string{"elect", "--ttl", "30s", "--identity", "A"}},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			c := client(t)
			ctx := context.Background()
			dir := t.TempDir()
			ready, goOn := filepath.Join(dir, "ready"), filepath.Join(dir, "go")
			name := "takeover-" + tc.cmd
			key := "tenure:{" + name + "}"
			t.Cleanup(func() { c.Del(ctx, key, key+":leader") })
			// The command waits for the test's word, so the takeover
			// surely happens while it runs.
			cmd := tenure(append(tc.args, name, "--", "sh", "-c",
				`echo up > "$1"; while [ ! -e "$2" ]; do sleep 0.02; done`, "sh", ready, goOn)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitFile(t, ready, 1, 10*time.Second)
			if err := c.Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.Set(ctx, key, "intruder", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(goOn, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if code := exitOf(t, cmd, 20*time.Second); code != exitLost {
				t.Errorf("status %d after a takeover found at the end, want %d; stderr: %s", code, exitLost, stderr.String())
			}
			if !strings.Contains(stderr.String(), "deleted or taken over by another holder") {
				t.Errorf("tenure does not say the lease was taken over: %s", stderr.String())
			}
			if v, _ := c.Get(ctx, key).Result(); v != "intruder" {
				t.Errorf("the intruder's key is %q", v)
			}
		})
	}
}

// TestRenewalsPushStop: a command that runs for several TTLs (1s, default
// grace 333ms) is never signalled while renewals succeed: each renewal
// moves the SIGTERM and SIGKILL with the deadline.
func TestRenewalsPushStop(t *testing.T) {
	term := filepath.Join(t.TempDir(), "term")
	code, _, stderr := result(t, tenure("run", "--ttl", "1s", "push", "--", "sh", "-c",
		`trap 'echo TERM >> "$1"' TERM; i=0; while [ $i -lt 60 ]; do sleep 0.05; i=$((i+1)); done`, "sh", term))
	if code != 0 {
		t.Errorf("status %d, want 0; stderr: %s", code, stderr)
	}
	if data, err := os.ReadFile(term); err == nil {
		t.Errorf("the command got %q while the lease was renewed; stderr: %s", data, stderr)
	}
}

// TestLeftoversKilledAtExit: what the command leaves running in its group
// when it exits is killed before the lease is released, since it would
// otherwise run on with no lease.
func TestLeftoversKilledAtExit(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pids")
	code, _, stderr := result(t, tenure("run", "leftover", "--", "sh", "-c", `sleep 300 >/dev/null 2>&1 & echo $$ $! > "$1"`, "sh", pidFile))
	if code != 0 {
		t.Fatalf("status %d: %s", code, stderr)
	}
	f := strings.Fields(waitFile(t, pidFile, 1, time.Second)[0])
	pid, _ := strconv.Atoi(f[1])
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	// tenure has exited: the sweep's SIGKILL was sent before; only its
	// delivery may still be under way.
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the command's background job %d outlived tenure", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid is a process that is neither gone nor a zombie.
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	return i >= 0 && i+2 < len(data) && data[i+2] != 'Z'
}
