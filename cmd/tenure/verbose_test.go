package main

// -v and -vv, the words for a loss, and a paused Redis (verbose.go,
// leasewatch.go).

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// TestVerbose: without -v a run that goes well prints nothing; -v logs the
// acquisition (name, fence, TTL) and the release but no renewal; -vv logs
// the renewals too. The command outlives the TTL, so a status of 0 proves
// that renewals were confirmed (without one, it would have been stopped).
func TestVerbose(t *testing.T) {
	run := func(verbosity ...string) string {
		t.Helper()
		args := append(verbosity, "run", "--ttl", "1s", "verbose", "--", "sleep", "1.2")
		code, _, stderr := result(t, tenure(args...))
		if code != 0 {
			t.Fatalf("%v: status %d, want 0; stderr: %s", args, code, stderr)
		}
		return stderr
	}
	if stderr := run(); stderr != "" {
		t.Errorf("without -v, stderr is %q", stderr)
	}
	stderr := run("-v")
	for _, want := range []string{"msg=acquired name=verbose fence=", "ttl=1s", "msg=released name=verbose"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("-v: stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "msg=renewed") {
		t.Errorf("-v logs renewals, which are -vv's:\n%s", stderr)
	}
	stderr = run("--verbose", "--verbose")
	for _, want := range []string{"msg=acquired name=verbose", "level=DEBUG msg=renewed name=verbose", "msg=released name=verbose"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("-vv: stderr lacks %q:\n%s", want, stderr)
		}
	}
	// -v comes after the subcommand too, as every global flag does.
	code, _, stderr := result(t, tenure("run", "-v", "verbose", "--", "true"))
	if code != 0 || !strings.Contains(stderr, "msg=acquired name=verbose") {
		t.Errorf("run -v: status %d, stderr %q", code, stderr)
	}
}

// TestLossText: each reason of a loss reads as the reason, in tenure's
// messages.
func TestLossText(t *testing.T) {
	if s := lossText(lease.LossTakenOver); !strings.Contains(s, "taken over by another holder") {
		t.Errorf("taken over: %q", s)
	}
	if s := lossText(lease.LossDeleted); !strings.Contains(s, "deleted") || strings.Contains(s, "taken over") {
		t.Errorf("deleted: %q", s)
	}
	if s := lossText(lease.LossExpired); !strings.Contains(s, "did not confirm a renewal") || !strings.Contains(s, "unreachable, slow or paused") {
		t.Errorf("expired: %q", s)
	}
}

// TestPausedRedis: Redis is paused (SIGSTOP) while "tenure run" holds a
// lease. tenure stops the command before the lease's local deadline,
// saying that Redis did not confirm a renewal, then waits for the release
// no later than the command's group is killed (200ms before the
// deadline; --release-timeout, 2s, would be later) and exits, saying that
// the release's outcome is unknown, all while Redis is still paused: the
// test resumes it only once tenure has exited.
func TestPausedRedis(t *testing.T) {
	out := runPaused(t, "run", "paused", []string{
		"has not confirmed a renewal of the lease in time (unreachable, slow or paused)",
		`releasing "paused": no reply from Redis by 200ms before the lease's local deadline, past which tenure does not wait after a loss`,
		"whether the lease was released is unknown",
		"it expires by its TTL (3s)",
		`the lease on "paused" was lost while the command ran: Redis did not confirm a renewal in time`,
	})
	// The release message comes before tenure's last word.
	if i, j := strings.Index(out, "no reply from Redis"), strings.Index(out, "was lost while the command ran"); i < 0 || j < i {
		t.Errorf("the release's message does not come before the loss's:\n%s", out)
	}
}

// runPaused runs "tenure SUB --ttl 3s [extra...] NAME -- CMD" against a
// server of its own, pauses the server once CMD runs, and checks that
// tenure exits 77 while the server is still paused (it is resumed only
// afterwards), saying each of wants; it returns tenure's stderr.
func runPaused(t *testing.T, sub, name string, wants []string, extra ...string) string {
	t.Helper()
	s := redistest.Start(t)
	ready := filepath.Join(t.TempDir(), "ready")
	args := append([]string{"--redis", s.URL(), sub, "--ttl", "3s"}, extra...)
	args = append(args, name, "--", "sh", "-c", `trap 'exit 0' TERM; echo up > "$1"; while :; do sleep 0.05; done`, "sh", ready)
	cmd := tenure(args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	startBackground(t, cmd)
	waitFile(t, ready, 1, 10*time.Second)
	s.MustPause(t)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = s.Resume()
		}
	})
	code := exitOf(t, cmd, 60*time.Second)
	if !s.Paused() {
		t.Fatal("Redis was resumed before tenure exited")
	}
	s.MustResume(t)
	resumed = true
	out := stderr.String()
	if code != exitLost {
		t.Errorf("status %d, want %d; stderr: %s", code, exitLost, out)
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
	return out
}

// TestPausedRedisElect: the same for a leader whose Redis is paused: as
// for tenure run, the release after the loss waits no later than the
// command's group would be killed (200ms before the deadline), not
// --release-timeout (1.5s, later here), and tenure says that the release's
// outcome is unknown, while Redis is still paused.
func TestPausedRedisElect(t *testing.T) {
	runPaused(t, "elect", "paused-elect", []string{
		`releasing "paused-elect": no reply from Redis by 200ms before the lease's local deadline, past which tenure does not wait after a loss`,
		"whether the lease was released is unknown",
		`leadership of "paused-elect"`,
	}, "--release-timeout", "1500ms")
}
