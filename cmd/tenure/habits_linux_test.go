package main

// Everyday use: holds without a command, shared runs, the exit flags, an
// interrupted wait, status --check, completion, and elect without a command.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/tests/redistest"
)

// TestHoldWithoutCommand: "tenure run NAME" prints what it holds, holds
// it while a second run waits (saying who holds it), and ends, releasing,
// when its stdin closes; the second runs its command only then.
func TestHoldWithoutCommand(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "in")
	h := startHold(t, tenure("run", "--holder", "hold-test/1", "hold-a"))
	if h.line.Name != "hold-a" || h.line.Kind != "lease" || h.line.Fence <= 0 || h.line.Holder != "hold-test/1" {
		t.Fatalf("the hold's line: %+v", h.line)
	}
	second := tenure("run", "--wait", "60s", "hold-a", "--", "sh", "-c", `echo in > "$1"`, "sh", marker)
	stderr := &syncBuffer{}
	second.Stderr = stderr
	startBackground(t, second)
	// It says once who holds the name, and that it waits.
	waitOutput(t, stderr, `"hold-a" is held by hold-test/1 (fence `, 30*time.Second)
	if !strings.Contains(stderr.String(), "waiting for it (--wait 1m0s)") || strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("the waiting run's stderr: %q", stderr.String())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the second run ran its command while the hold held the name")
	}
	if code, _, _ := result(t, tenure("status", "--check", "hold-a")); code != 0 {
		t.Errorf("status --check of a held name: %d, want 0", code)
	}
	h.stdin.Close()
	if code := exitOf(t, h.cmd, 30*time.Second); code != 0 {
		t.Errorf("the hold exited %d after its stdin closed, want 0; stderr: %s", code, h.stderr.String())
	}
	if code := exitOf(t, second, 30*time.Second); code != 0 {
		t.Errorf("the waiting run exited %d, want 0; stderr: %s", code, stderr.String())
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the second run did not run its command after the hold: %v", err)
	}
	if code, _, _ := result(t, tenure("status", "--check", "hold-a")); code != exitFree {
		t.Errorf("status --check of a free name: %d, want %d", code, exitFree)
	}
}

// TestHoldEndsBySignal: SIGTERM ends a hold with status 0, released.
func TestHoldEndsBySignal(t *testing.T) {
	h := startHold(t, tenure("run", "hold-sig"))
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	if code := exitOf(t, h.cmd, 30*time.Second); code != 0 {
		t.Errorf("status %d, want 0; stderr: %s", code, h.stderr.String())
	}
	if n, _ := client(t).Exists(context.Background(), "tenure:{hold-sig}").Result(); n != 0 {
		t.Error("the hold left its lease")
	}
}

// TestHoldLost: a hold whose key is deleted exits with --lost-exit (77 by
// default), saying why.
func TestHoldLost(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  int
	}{{nil, exitLost}, {[]string{"--lost-exit", "201"}, 201}} {
		t.Run(fmt.Sprint(tc.want), func(t *testing.T) {
			name := fmt.Sprintf("hold-lost-%d", tc.want)
			h := startHold(t, tenure(append(append([]string{"run", "--ttl", "1s"}, tc.flags...), name)...))
			if err := client(t).Del(context.Background(), "tenure:{"+name+"}").Err(); err != nil {
				t.Fatal(err)
			}
			if code := exitOf(t, h.cmd, 30*time.Second); code != tc.want {
				t.Errorf("status %d, want %d; stderr: %s", code, tc.want, h.stderr.String())
			}
			want := fmt.Sprintf(`the lease on %q was lost while held: its key was deleted`, name)
			if !strings.Contains(h.stderr.String(), want) {
				t.Errorf("stderr lacks %q: %s", want, h.stderr.String())
			}
		})
	}
}

// TestLossNamesCause: a hold cut off from its server says, when it gives
// NAME up before its local deadline, what the renewals' last error was.
// Renewals to a killed server end by their context while go-redis retries
// the dial; the PING that finds "connection refused" behind that, sent at
// the first failure, needs those retries too (5 of 100ms): the TTL leaves
// it time before the hold exits, which it does not wait past.
func TestLossNamesCause(t *testing.T) {
	own, err := redistest.StartServer(redistest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = own.Stop() })
	c := exec.Command(bin, "run", "--ttl", "5s", "hold-cut")
	c.Env = append(os.Environ(), "REDIS_URL="+own.URL())
	h := startHold(t, c)
	if err := own.Kill(); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, h.cmd, 30*time.Second); code != exitLost {
		t.Errorf("status %d, want %d; stderr: %s", code, exitLost, h.stderr.String())
	}
	if s := h.stderr.String(); !strings.Contains(s, "the last renewal failed: ") || !strings.Contains(s, "refused") {
		t.Errorf("the loss does not name the renewals' error (connection refused): %s", s)
	}
}

// TestSharedRuns: two shared runs are inside at once (each waits to see
// the other's marker); an exclusive run and a shared one exclude each
// other, either way round.
func TestSharedRuns(t *testing.T) {
	dir := t.TempDir()
	both := `touch "$1/in-$2"; i=0; while [ "$(ls "$1" | grep -c in-)" -lt 2 ]; do i=$((i+1)); [ $i -gt 600 ] && exit 3; sleep 0.05; done`
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			code, _, stderr := result(t, tenure("run", "--shared", "shared-a", "--", "sh", "-c", both, "sh", dir, fmt.Sprint(i)))
			if code != 0 {
				t.Errorf("shared run %d exited %d (3: it never saw the other inside): %s", i, code, stderr)
			}
		})
	}
	wg.Wait()

	reader := startHold(t, tenure("run", "--shared", "shared-b"))
	if reader.line.Kind != "read lock" {
		t.Errorf("the read lock's line: %+v", reader.line)
	}
	if code, _, stderr := result(t, tenure("run", "--wait", "0", "shared-b", "--", "true")); code != exitTimeout {
		t.Errorf("an exclusive run beside a reader exited %d, want %d: %s", code, exitTimeout, stderr)
	}
	reader.stdin.Close()
	exitOf(t, reader.cmd, 30*time.Second)
	writer := startHold(t, tenure("run", "shared-b"))
	if code, _, stderr := result(t, tenure("run", "--shared", "--wait", "0", "shared-b", "--", "true")); code != exitTimeout {
		t.Errorf("a shared run beside a writer exited %d, want %d: %s", code, exitTimeout, stderr)
	}
	writer.stdin.Close()
	exitOf(t, writer.cmd, 30*time.Second)
}

// TestSharedAndExclusiveNeverOverlap: shared and exclusive runs of one
// name, concurrently; the log shows no exclusive run beside any other.
func TestSharedAndExclusiveNeverOverlap(t *testing.T) {
	file := filepath.Join(t.TempDir(), "log")
	script := `echo "start $2" >> "$1"; sleep 0.1; echo "end $2" >> "$1"`
	var wg sync.WaitGroup
	for _, kind := range []string{"r", "r", "w"} {
		wg.Go(func() {
			for range 3 {
				args := []string{"run", "--ttl", "5s", "mixed", "--", "sh", "-c", script, "sh", file, kind}
				if kind == "r" {
					args = append([]string{"run", "--shared"}, args[1:]...)
				}
				if code, _, stderr := result(t, tenure(args...)); code != 0 {
					t.Errorf("%s run exited %d: %s", kind, code, stderr)
				}
			}
		})
	}
	wg.Wait()
	data, _ := os.ReadFile(file)
	readers, writers := 0, 0
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		switch l {
		case "start r":
			readers++
		case "end r":
			readers--
		case "start w":
			writers++
		case "end w":
			writers--
		}
		if writers > 1 || writers == 1 && readers > 0 {
			t.Fatalf("an exclusive run overlapped another run:\n%s", data)
		}
	}
	if n := strings.Count(string(data), "start"); n != 9 {
		t.Errorf("%d runs, want 9:\n%s", n, data)
	}
}

// TestExitFlags: --held-exit and --lost-exit replace 75 and 77, and are
// validated.
func TestExitFlags(t *testing.T) {
	h := startHold(t, tenure("run", "flags-busy"))
	defer func() { h.stdin.Close(); exitOf(t, h.cmd, 30*time.Second) }()
	for _, tc := range []struct {
		args   []string
		status int
		stderr string
	}{
		{[]string{"run", "--wait", "0", "--held-exit", "200", "flags-busy", "--", "true"}, 200, `"flags-busy" is held by `},
		{[]string{"run", "--wait", "100ms", "--held-exit", "3", "flags-busy", "--", "true"}, 3, "not acquired within --wait 100ms"},
		{[]string{"run", "--held-exit", "0", "x", "--", "true"}, exitUsage, "--held-exit 0: an exit status is 1 to 255"},
		{[]string{"run", "--lost-exit", "256", "x", "--", "true"}, exitUsage, "--lost-exit 256: an exit status is 1 to 255"},
		{[]string{"elect", "--lost-exit", "-1", "x", "--", "true"}, exitUsage, "--lost-exit -1"},
		{[]string{"run", "--held-exit", "77", "x", "--", "true"}, exitUsage, "--held-exit and --lost-exit are both 77"},
		{[]string{"run", "--held-exit", "9", "--lost-exit", "9", "x", "--", "true"}, exitUsage, "both 9"},
		{[]string{"run", "--shared", "-n", "2", "x", "--", "true"}, exitUsage, "--shared and -n exclude each other"},
		{[]string{"run", "x", "--"}, exitUsage, "NAME alone to hold it"},
	} {
		code, _, stderr := result(t, tenure(tc.args...))
		if code != tc.status || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%v: status %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.status, tc.stderr)
		}
	}
}

// TestInterruptedWait: SIGINT to a waiting run ends it with 128+2 and
// names the signal as SIGINT (not "interrupt").
func TestInterruptedWait(t *testing.T) {
	h := startHold(t, tenure("run", "int-busy"))
	defer func() { h.stdin.Close(); exitOf(t, h.cmd, 30*time.Second) }()
	w := tenure("run", "int-busy", "--", "true")
	stderr := &syncBuffer{}
	w.Stderr = stderr
	startBackground(t, w)
	waitOutput(t, stderr, "waiting for it", 30*time.Second)
	_ = w.Process.Signal(syscall.SIGINT)
	if code := exitOf(t, w, 30*time.Second); code != 128+2 {
		t.Errorf("status %d, want 130", code)
	}
	if !strings.Contains(stderr.String(), `interrupted by SIGINT while waiting for "int-busy"`) {
		t.Errorf("stderr: %q", stderr.String())
	}
}

// TestStatusCheck: --check answers by exit status alone, -n included.
func TestStatusCheck(t *testing.T) {
	h := startHold(t, tenure("run", "-n", "2", "check-sem"))
	defer func() { h.stdin.Close(); exitOf(t, h.cmd, 30*time.Second) }()
	for _, tc := range []struct {
		args   []string
		status int
	}{
		{[]string{"status", "--check", "check-sem"}, 0},
		{[]string{"status", "--check", "-n", "1", "check-sem"}, 0},
		{[]string{"status", "--check", "-n", "2", "check-sem"}, exitFree},
		{[]string{"status", "--check", "check-free"}, exitFree},
		{[]string{"status", "--check", "--json", "check-sem"}, exitUsage},
		{[]string{"status", "--check", "--watch", "check-sem"}, exitUsage},
		{[]string{"--redis", "127.0.0.1:1", "status", "--check", "check-sem"}, exitRedis},
	} {
		code, out, stderr := result(t, tenure(tc.args...))
		if code != tc.status || out != "" {
			t.Errorf("%v: status %d, stdout %q (stderr %q); want %d and no output", tc.args, code, out, stderr, tc.status)
		}
	}
}

// TestCompletion: the completion command writes scripts, and NAME
// arguments complete from the held names, or quietly from nothing when
// Redis is unreachable.
func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, stderr := result(t, tenure("completion", sh))
		if code != 0 || !strings.Contains(out, "tenure") || len(out) < 500 {
			t.Errorf("completion %s: %d, %d bytes; %s", sh, code, len(out), stderr)
		}
	}
	h := startHold(t, tenure("run", "comp-one"))
	defer func() { h.stdin.Close(); exitOf(t, h.cmd, 30*time.Second) }()
	for _, args := range [][]string{{"status", ""}, {"status", "comp-"}, {"run", "comp"}, {"release", "co"}, {"elect", "c"}} {
		code, out, stderr := result(t, tenure(append([]string{"__complete"}, args...)...))
		if code != 0 || !strings.Contains(out, "comp-one\n") {
			t.Errorf("__complete %q: %d %q %s", args, code, out, stderr)
		}
	}
	// Past NAME, run completes as the shell would (commands, files).
	if _, out, _ := result(t, tenure("__complete", "run", "comp-one", "--", "")); strings.Contains(out, "comp-one") {
		t.Errorf("run completes NAME past NAME: %q", out)
	}
	code, out, _ := result(t, tenure("--redis", "127.0.0.1:1", "__complete", "status", ""))
	if code != 0 || strings.TrimSpace(out) != ":4" {
		t.Errorf("completion with Redis unreachable: %d %q, want only the directive", code, out)
	}
}

// TestReleaseForceNamesHolder: release --force says whose lease it
// removed (never its token), and counts permits in words.
func TestReleaseForceNamesHolder(t *testing.T) {
	h := startHold(t, tenure("run", "--holder", "ops-7/99", "force-lease"))
	token, _ := client(t).Get(context.Background(), "tenure:{force-lease}").Result()
	code, out, stderr := result(t, tenure("release", "--force", "force-lease"))
	if code != 0 || !strings.Contains(out, "held by ops-7/99") || token == "" || strings.Contains(out, token) {
		t.Errorf("release --force of a lease: %d %q %s", code, out, stderr)
	}
	h.stdin.Close()
	exitOf(t, h.cmd, 30*time.Second)
	p := startHold(t, tenure("run", "-n", "3", "--holder", "ops-8/1", "force-permit"))
	code, out, _ = result(t, tenure("release", "--force", "force-permit"))
	if code != 0 || !strings.Contains(out, `revoked the permit of "force-permit"`) || !strings.Contains(out, "ops-8/1") {
		t.Errorf("release --force of one permit: %d %q", code, out)
	}
	p.stdin.Close()
	exitOf(t, p.cmd, 30*time.Second)
}

// TestElectWithoutCommand: "tenure elect NAME" (refused before, as it is
// not by etcdctl elect) leads without a command: it prints the term it
// leads, holds the leadership while another candidate waits, and resigns,
// exiting 0, when its stdin closes, and the other leads then; a signal
// ends it likewise; a lost lease is 77, saying why. A command may follow
// NAME without "--".
func TestElectWithoutCommand(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "led")
	h := startHold(t, tenure("elect", "--identity", "alone-1", "elect-alone"))
	if h.line.Name != "elect-alone" || h.line.Kind != "leadership" || h.line.Fence <= 0 || h.line.Holder != "alone-1" {
		t.Fatalf("the leader's line: %+v", h.line)
	}
	code, out, _ := result(t, tenure("status", "elect-alone"))
	if code != 0 || !strings.Contains(out, fmt.Sprintf("leader   alone-1 (term %d)", h.line.Fence)) {
		t.Errorf("status while it leads: %d\n%s", code, out)
	}
	second := tenure("elect", "--identity", "alone-2", "elect-alone", "sh", "-c", `echo "$TENURE_IDENTITY" > "$1"`, "sh", marker)
	stderr := &syncBuffer{}
	second.Stderr = stderr
	startBackground(t, second)
	waitOutput(t, stderr, `"elect-alone" is led by alone-1`, 30*time.Second)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the second candidate led while the first did")
	}
	h.stdin.Close()
	if code := exitOf(t, h.cmd, 30*time.Second); code != 0 {
		t.Errorf("the leader exited %d after its stdin closed, want 0; stderr: %s", code, h.stderr.String())
	}
	if code := exitOf(t, second, 30*time.Second); code != 0 {
		t.Errorf("the second candidate exited %d, want 0; stderr: %s", code, stderr.String())
	}
	waitFile(t, marker, 1, time.Second)

	s := startHold(t, tenure("elect", "elect-alone-sig"))
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	if code := exitOf(t, s.cmd, 30*time.Second); code != 0 {
		t.Errorf("after SIGTERM: status %d, want 0; stderr: %s", code, s.stderr.String())
	}
	if n, _ := client(t).Exists(context.Background(), "tenure:{elect-alone-sig}").Result(); n != 0 {
		t.Error("the leader left its lease after SIGTERM")
	}

	l := startHold(t, tenure("elect", "--ttl", "1s", "elect-alone-lost"))
	if err := client(t).Del(context.Background(), "tenure:{elect-alone-lost}").Err(); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, l.cmd, 30*time.Second); code != exitLost ||
		!strings.Contains(l.stderr.String(), fmt.Sprintf(`leadership of "elect-alone-lost" (term %d) was lost while held: `, l.line.Fence)) {
		t.Errorf("a lost leadership: status %d, want %d; stderr: %s", code, exitLost, l.stderr.String())
	}
}
