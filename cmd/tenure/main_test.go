package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/redistest"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/reentrant"
)

// bin is the tenure binary built once for the tests; srv is their Redis.
var (
	bin string
	srv *redistest.Server
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "tenure-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "tenure")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building tenure: %v\n%s", err, out)
		return 1
	}
	srv, err = redistest.StartServer(redistest.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	_ = srv.Stop()
	if code == 0 {
		if err := redistest.Leaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}

// tenure returns the command for the built binary against the test server.
func tenure(args ...string) *exec.Cmd {
	c := exec.Command(bin, args...)
	c.Env = append(os.Environ(), "REDIS_URL="+srv.URL())
	return c
}

// result runs c and returns its exit status and output.
func result(t *testing.T, c *exec.Cmd) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running %v: %v", c.Args, err)
	}
	return c.ProcessState.ExitCode(), out.String(), errOut.String()
}

func client(t *testing.T) *redis.Client { return srv.Client(t) }

// startBackground starts cmd, and kills it at the end of the test if it
// has not been waited for by then.
func startBackground(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
}

// anyButUsage is a TestExitStatuses status: the command ran (0), or was
// stopped for want of a renewal in time (exitLost), never a usage error.
const anyButUsage = -1

func TestExitStatuses(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	if err := c.Set(ctx, "tenure:{busy}", "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Del(ctx, "tenure:{busy}") })
	for _, tc := range []struct {
		what   string
		args   []string
		status int
		stderr string
	}{
		{"the command's status", []string{"run", "s1", "--", "sh", "-c", "exit 7"}, 7, ""},
		{"success", []string{"run", "s1", "--", "true"}, 0, ""},
		{"killed by a signal", []string{"run", "s1", "--", "sh", "-c", "kill -KILL $$"}, 128 + 9, ""},
		{"not found", []string{"run", "s1", "--", "no-such-command-here"}, exitNoCmd, "not found"},
		{"no command after --", []string{"run", "s1", "--"}, exitUsage, "NAME -- COMMAND"},
		// COMMAND may follow NAME without "--", as with flock; it was a
		// usage error.
		{"no dash", []string{"run", "s1", "true"}, 0, ""},
		{"no dash, the command's own flags", []string{"run", "--ttl", "5s", "s1", "sh", "-c", "exit 7"}, 7, ""},
		// The form with tenure's flags after NAME, then "--", still works.
		{"flags after NAME, then --", []string{"run", "s1", "--ttl", "5s", "--", "sh", "-c", "exit 6"}, 6, ""},
		{"flags after NAME, no --", []string{"run", "s1", "--ttl", "5s", "true"}, exitUsage, `"true" after NAME and flags`},
		{"a bad flag after NAME", []string{"run", "s1", "--nope", "--", "true"}, exitUsage, "unknown flag: --nope"},
		{"elect, no dash", []string{"elect", "--ttl", "5s", "s1", "sh", "-c", "exit 4"}, 4, ""},
		{"elect, flags after NAME, then --", []string{"elect", "s1", "--ttl", "5s", "--", "sh", "-c", "exit 3"}, 3, ""},
		{"bad flag", []string{"run", "--nope", "s1", "--", "true"}, exitUsage, "unknown flag"},
		{"bad duration", []string{"run", "--wait", "soon", "s1", "--", "true"}, exitUsage, `"soon" is neither a duration nor "forever"`},
		{"wait never", []string{"run", "--wait", "never", "s1", "--", "true"}, exitUsage,
			`--wait takes a duration with a unit ("10s", "1m", "1h30m"), 0 for one attempt, or "forever"`},
		{"ttl without a unit", []string{"run", "--ttl", "5", "s1", "--", "true"}, exitUsage, `duration "5" has no unit: say "5s"`},
		{"grace without a unit", []string{"elect", "--grace", "1.5", "s1", "--", "true"}, exitUsage, `duration "1.5" has no unit: say "1.5s"`},
		{"wait without a unit", []string{"run", "--wait", "10", "s1", "--", "true"}, exitUsage, `duration "10" has no unit`},
		{"release timeout without a unit", []string{"run", "--release-timeout", "2", "s1", "--", "true"}, exitUsage, `duration "2" has no unit`},
		{"interval without a unit", []string{"status", "--watch", "--interval", "1", "s1"}, exitUsage, `duration "1" has no unit`},
		{"elect has no --wait", []string{"elect", "--wait", "1s", "s1", "--", "true"}, exitUsage, "unknown flag: --wait"},
		{"unclosed class", []string{"list", "["}, exitUsage, `bad PATTERN "[": the [ at byte 0 opens a class that no ] closes`},
		{"trailing backslash", []string{"list", `s\`}, exitUsage, `bad PATTERN "s\\": it ends in a backslash`},
		{"observe with a command", []string{"elect", "--observe", "s1", "--", "true"}, exitUsage, "--observe takes NAME alone"},
		{"observe with a candidate's flag", []string{"elect", "--observe", "--ttl", "5s", "s1"}, exitUsage, "--ttl is a candidate's"},
		{"status of two names", []string{"status", "s1", "s2"}, exitUsage, "only --watch takes several"},
		{"interval without --watch", []string{"status", "--interval", "1s", "s1"}, exitUsage, "--interval is --watch's"},
		{"short ttl", []string{"run", "--ttl", "1ms", "s1", "--", "true"}, exitUsage, "below the minimum"},
		{"grace too long", []string{"run", "--ttl", "300ms", "--grace", "1s", "s1", "--", "true"}, exitUsage, "the largest --grace for --ttl 300ms is 170ms"},
		{"grace just too long", []string{"elect", "--ttl", "30s", "--grace", "17.199s", "s1", "--", "true"}, exitUsage, "the largest --grace for --ttl 30s is 17.198s"},
		{"grace at the limit", []string{"run", "--ttl", "300ms", "--grace", "170ms", "s1", "--", "true"}, anyButUsage, ""},
		// The default grace fits the shortest TTL: no usage error. Whether
		// `true` finishes within the 8ms the lease is trusted for depends
		// on the machine's load, so either outcome of the run is right.
		{"default grace, shortest ttl", []string{"run", "--ttl", "10ms", "s1", "--", "true"}, anyButUsage, ""},
		{"default grace, short ttl", []string{"run", "--ttl", "300ms", "s1", "--", "true"}, 0, ""},
		{"bad name", []string{"run", "}x", "--", "true"}, exitUsage, "starts with"},
		{"unknown command", []string{"frobnicate"}, exitUsage, "unknown command"},
		{"release without --force", []string{"release", "s1"}, exitUsage, "--force"},
		{"bad redis URL", []string{"--redis", "http://x", "status", "s1"}, exitUsage, "redis URL"},
		{"redis unreachable", []string{"--redis", "redis://127.0.0.1:1", "run", "s1", "--", "true"}, exitRedis, "127.0.0.1:1"},
		{"wait runs out", []string{"run", "--wait", "200ms", "busy", "--", "true"}, exitTimeout, "not acquired"},
		{"one attempt", []string{"run", "--wait", "0", "busy", "--", "true"}, exitTimeout, "not acquired"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			code, _, stderr := result(t, tenure(tc.args...))
			if tc.status == anyButUsage {
				if code != 0 && code != exitLost {
					t.Errorf("status %d, want 0 or %d (no usage error); stderr: %s", code, exitLost, stderr)
				}
				return
			}
			if code != tc.status {
				t.Errorf("status %d, want %d; stderr: %s", code, tc.status, stderr)
			}
			if !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr %q does not mention %q", stderr, tc.stderr)
			}
			// A run that waits says so once before its last word.
			n := strings.Count(stderr, "\n") - strings.Count(stderr, "; waiting for it (--wait ")
			if code != 0 && tc.stderr != "" && n != 1 {
				t.Errorf("stderr has %d lines, want one: %q", n, stderr)
			}
		})
	}
	if n, _ := c.Exists(ctx, "tenure:{s1}").Result(); n != 0 {
		t.Error("a run left its lease held")
	}
}

// TestRunNoOverlap: two tenure processes on one name, each running the
// command several times; the command's start and end lines never overlap
// and the fences grow.
func TestRunNoOverlap(t *testing.T) {
	file := filepath.Join(t.TempDir(), "log")
	script := `echo "start $(date +%s%N) $TENURE_FENCE $TENURE_NAME" >> "$1"; sleep 0.15; echo "end $(date +%s%N)" >> "$1"`
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for range 3 {
				code, _, stderr := result(t, tenure("run", "--ttl", "2s", "overlap", "--", "sh", "-c", script, "sh", file))
				if code != 0 {
					t.Errorf("status %d: %s", code, stderr)
				}
			}
		})
	}
	wg.Wait()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 12 {
		t.Fatalf("%d lines, want 12:\n%s", len(lines), data)
	}
	var lastEnd, lastFence int64
	for i := 0; i < len(lines); i += 2 {
		s, e := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(s) != 4 || s[0] != "start" || len(e) != 2 || e[0] != "end" || s[3] != "overlap" {
			t.Fatalf("runs overlap or a line is malformed at line %d:\n%s", i+1, data)
		}
		start, _ := strconv.ParseInt(s[1], 10, 64)
		end, _ := strconv.ParseInt(e[1], 10, 64)
		fence, _ := strconv.ParseInt(s[2], 10, 64)
		if start < lastEnd || end < start {
			t.Errorf("run %d started at %d, before the previous ended at %d", i/2, start, lastEnd)
		}
		if fence <= lastFence {
			t.Errorf("run %d has fence %d after %d", i/2, fence, lastFence)
		}
		lastEnd, lastFence = end, fence
	}
}

// waitFile waits until path has at least n lines, and returns them.
func waitFile(t *testing.T, path string, n int, within time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		data, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(data) > 0 && len(lines) >= n {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %q after %v, want %d lines", path, data, within, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exitOf waits for a started command and returns its status.
func exitOf(t *testing.T, c *exec.Cmd, within time.Duration) int {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	select {
	case <-done:
		return c.ProcessState.ExitCode()
	case <-time.After(within):
		_ = c.Process.Kill()
		<-done
		t.Fatalf("%v still running after %v", c.Args, within)
		return -1
	}
}

// TestLostLeaseStopsCommand: overwriting the key makes tenure stop a
// command that traps SIGTERM: SIGTERM first (the shell survives it and says
// so), then SIGKILL (nothing else could end it), its whole process group
// with it, all before tenure exits 77.
func TestLostLeaseStopsCommand(t *testing.T) {
	for _, tc := range []struct {
		how  string
		do   func(ctx context.Context, c *redis.Client, key string) error
		why  string // the reason tenure must give
		left string // what the key must hold afterwards
	}{
		{"taken over", func(ctx context.Context, c *redis.Client, key string) error {
			return c.Set(ctx, key, "intruder", time.Minute).Err()
		}, "it was taken over by another holder (the server holds another token)", "intruder"},
		{"deleted", func(ctx context.Context, c *redis.Client, key string) error {
			return c.Del(ctx, key).Err()
		}, "its key was deleted, or expired on the server (the server no longer has it)", ""},
	} {
		t.Run(tc.how, func(t *testing.T) {
			c := client(t)
			ctx := context.Background()
			dir := t.TempDir()
			name := "lost-" + strings.ReplaceAll(tc.how, " ", "-")
			key := "tenure:{" + name + "}"
			pidFile, termFile := filepath.Join(dir, "pid"), filepath.Join(dir, "term")
			cmd := tenure("run", "--ttl", "3s", "--grace", "1s", name, "--",
				"sh", "-c", `trap 'echo term >> "$2"' TERM; echo $$ > "$1"; while :; do sleep 0.05; done`, "sh", pidFile, termFile)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid, _ := strconv.Atoi(waitFile(t, pidFile, 1, 5*time.Second)[0])
			t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
			if err := tc.do(ctx, c, key); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Del(ctx, key) })
			// A renewal (every second) finds the loss.
			if code := exitOf(t, cmd, 20*time.Second); code != exitLost {
				t.Errorf("status %d, want %d; stderr: %s", code, exitLost, stderr.String())
			}
			if data, _ := os.ReadFile(termFile); string(data) != "term\n" {
				t.Errorf("the command's SIGTERM record is %q, want one SIGTERM before the SIGKILL", data)
			}
			if live := liveInGroup(pid); len(live) > 0 {
				t.Errorf("the command's process group still has live processes: %v", live)
			}
			if v, _ := c.Get(ctx, key).Result(); v != tc.left {
				t.Errorf("the key holds %q, want %q", v, tc.left)
			}
			// The loss is reported with its reason, in the notice and in
			// the last word.
			for _, want := range []string{
				fmt.Sprintf(`the lease on %q was lost: %s; sent SIGTERM`, name, tc.why),
				fmt.Sprintf(`the lease on %q was lost while the command ran: %s`, name, tc.why),
			} {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
		})
	}
}

// TestSignalPassedOn: SIGTERM to tenure reaches the command, whose status
// tenure exits with, and the lease is released.
func TestSignalPassedOn(t *testing.T) {
	c := client(t)
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := tenure("run", "sig", "--", "sh", "-c", `trap "exit 42" TERM; echo up > "$1"; while :; do sleep 0.05; done`, "sh", ready)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, ready, 1, 5*time.Second)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, cmd, 5*time.Second); code != 42 {
		t.Errorf("status %d, want the command's 42", code)
	}
	if n, _ := c.Exists(context.Background(), "tenure:{sig}").Result(); n != 0 {
		t.Error("the lease is still held")
	}
}

func TestStatusListRelease(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	m, err := lease.New(c, lease.WithLogger(quietLogger()), lease.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.Acquire(ctx, "inspect-lease")
	if err != nil {
		t.Fatal(err)
	}
	lk := reentrant.New(m)
	rctx := reentrant.WithOwner(ctx, "job-7")
	r1, err := lk.Lock(rctx, "inspect-reentrant")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := lk.Lock(r1.Context(), "inspect-reentrant")
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Unlock(ctx)
	defer r2.Unlock(ctx)

	code, out, stderr := result(t, tenure("list", "--json", "inspect-*"))
	if code != 0 {
		t.Fatalf("list: %d %s", code, stderr)
	}
	var hs []holding
	if err := json.Unmarshal([]byte(out), &hs); err != nil {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	if len(hs) != 2 || hs[0].Name != "inspect-lease" || hs[1].Name != "inspect-reentrant" {
		t.Fatalf("list: %+v", hs)
	}
	if h := hs[0]; h.Kind != "lease" || h.Fence != l.Fence() || h.TTLms <= 0 || h.TTLms > 1000 {
		t.Errorf("lease: %+v (fence %d)", h, l.Fence())
	}
	if h := hs[1]; h.Kind != "reentrant" || h.Owners["job-7"] != 2 {
		t.Errorf("reentrant lock: %+v", h)
	}
	if strings.Contains(out, l.Token()) {
		t.Error("list shows the lease's token")
	}
	code, out, _ = result(t, tenure("list", "inspect-*"))
	if code != 0 || !strings.Contains(out, "inspect-reentrant") || !strings.Contains(out, "job-7×2") {
		t.Errorf("list text: %d\n%s", code, out)
	}
	code, out, _ = result(t, tenure("status", "inspect-lease"))
	if code != 0 || !strings.Contains(out, "kind     lease") || !strings.Contains(out, strconv.FormatInt(l.Fence(), 10)) {
		t.Errorf("status: %d\n%s", code, out)
	}
	// The waiters are "waiting", as in the JSON.
	if !strings.Contains(out, "waiting  0") || strings.Contains(out, "queued") {
		t.Errorf("status does not call the waiters as its JSON does (waiting):\n%s", out)
	}
	code, out, _ = result(t, tenure("status", "--json", "nobody-holds-this"))
	if code != 0 || !strings.Contains(out, `"kind": "free"`) {
		t.Errorf("status of a free name: %d\n%s", code, out)
	}

	// release --force removes the lease and tells the waiters.
	ps := c.Subscribe(ctx, "tenure:{inspect-lease}:released")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = result(t, tenure("release", "--force", "inspect-lease"))
	if code != 0 || !strings.Contains(out, `removed the lease on "inspect-lease"`) {
		t.Errorf("release: %d %q %q", code, out, stderr)
	}
	mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := ps.ReceiveMessage(mctx); err != nil {
		t.Errorf("no release message: %v", err)
	}
	select {
	case <-l.Done():
	case <-time.After(15 * time.Second):
		t.Error("the holder did not learn of the loss")
	}
	code, out, _ = result(t, tenure("release", "--force", "inspect-lease"))
	if code != 0 || !strings.Contains(out, "nothing removed") {
		t.Errorf("second release: %d %q", code, out)
	}
	code, out, _ = result(t, tenure("release", "--force", "inspect-reentrant"))
	if code != 0 || !strings.Contains(out, "job-7×2") {
		t.Errorf("release of the reentrant lock: %d %q", code, out)
	}
}

// TestElect: of two "tenure elect", the first runs its command; when it
// ends (a signal), the first resigns and the other takes over, before the
// first's TTL could have freed the name; when the second loses the lease,
// its command is stopped and it exits 77.
func TestElect(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "terms")
	script := `echo "$TENURE_IDENTITY $TENURE_FENCE" >> "$1"; trap "exit 0" TERM; while :; do sleep 0.05; done`
	start := func(id, ttl string) *exec.Cmd {
		cmd := tenure("elect", "--ttl", ttl, "--identity", id, "sched", "--", "sh", "-c", script, "sh", file)
		startBackground(t, cmd)
		return cmd
	}
	// A leads first, with a TTL long enough that only its resignation can
	// hand over within the test's waits; B's short TTL makes its loss
	// quick to detect.
	a := start("A", "60s")
	first := strings.Fields(waitFile(t, file, 1, 10*time.Second)[0])
	if first[0] != "A" {
		t.Fatalf("first term %v, want A's", first)
	}
	b := start("B", "1s")
	code, out, _ := result(t, tenure("status", "--json", "sched"))
	var h holding
	if err := json.Unmarshal([]byte(out), &h); code != 0 || err != nil || h.Leader == nil || h.Leader.Identity != first[0] ||
		strconv.FormatInt(h.Leader.Fence, 10) != first[1] {
		t.Fatalf("status of the election: %d %v %s", code, err, out)
	}
	_ = a.Process.Signal(syscall.SIGTERM)
	if code := exitOf(t, a, 20*time.Second); code != 0 {
		t.Errorf("the first leader exited %d, want its command's 0", code)
	}
	second := strings.Fields(waitFile(t, file, 2, 20*time.Second)[1])
	if second[0] != "B" || second[1] <= first[1] {
		t.Errorf("second term %v after %v", second, first)
	}
	if err := c.Del(ctx, "tenure:{sched}").Err(); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, b, 20*time.Second); code != exitLost {
		t.Errorf("the second leader exited %d after losing the lease, want %d", code, exitLost)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// liveInGroup lists the processes of group pgid that are neither gone nor
// zombies (an orphan may wait for a reaper that a container lacks).
func liveInGroup(pgid int) []string {
	if syscall.Kill(-pgid, 0) != nil {
		return nil
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var live []string
	for _, p := range stats {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces, so split after ')'.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) >= 3 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			live = append(live, p+": "+f[0])
		}
	}
	return live
}

// TestCommandAfterName: what follows NAME is COMMAND's, its flags
// included, with or without "--"; tenure's flags after NAME, in the form
// "NAME FLAGS -- COMMAND", are still tenure's (-v there logs), and --help
// there is answered.
func TestCommandAfterName(t *testing.T) {
	script := `printf '%s|' "$TENURE_NAME" "$@"`
	for _, args := range [][]string{
		{"run", "--wait", "10s", "after-name", "sh", "-c", script, "sh", "--wait", "0", "-v", "--"},
		{"run", "--wait", "10s", "after-name", "--", "sh", "-c", script, "sh", "--wait", "0", "-v", "--"},
	} {
		code, out, stderr := result(t, tenure(args...))
		if code != 0 || out != "after-name|--wait|0|-v|--|" || stderr != "" {
			t.Errorf("%q: status %d, stdout %q, stderr %q", args, code, out, stderr)
		}
	}
	code, out, stderr := result(t, tenure("run", "after-name", "-v", "--ttl", "5s", "--", "sh", "-c", script, "sh"))
	if code != 0 || out != "after-name|" || !strings.Contains(stderr, "msg=acquired") || !strings.Contains(stderr, "ttl=5s") {
		t.Errorf("flags after NAME: status %d, stdout %q, stderr %q", code, out, stderr)
	}
	code, out, _ = result(t, tenure("run", "after-name", "--help"))
	if code != 0 || !strings.Contains(out, "Usage:") {
		t.Errorf("--help after NAME: status %d: %s", code, out)
	}
	if n, _ := client(t).Exists(context.Background(), "tenure:{after-name}").Result(); n != 0 {
		t.Error("a run left its lease held")
	}
}
