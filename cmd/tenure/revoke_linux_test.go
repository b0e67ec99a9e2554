package main

// "tenure release --force" revokes (release_force.lua): the name stays
// barred until its holder confirms that its command is dead, or until the
// holder's TTL runs out, so that S9 holds through an operator's force too.
// As in safety_linux_test.go, the tests check order, not the clock: the
// next holder's command looks for the first command's live processes when
// it starts.

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// TestReleaseForceKeepsS9: a command that ignores SIGTERM holds NAME; a
// second run waits for it; release --force revokes the first. The second
// run's command, when it starts, finds nothing of the first command's
// group alive: the name stayed barred until the first command died
// (SIGKILL near its old deadline). Before revocations (today's --now) the
// second ran beside the first for most of a TTL.
func TestReleaseForceKeepsS9(t *testing.T) {
	dir := t.TempDir()
	pidFile, out := filepath.Join(dir, "pids"), filepath.Join(dir, "out")
	var stderrA bytes.Buffer
	a := tenure("run", "--ttl", "6s", "revoke-s9", "--", "sh", "-c", stubborn, "sh", pidFile)
	a.Stderr = &stderrA
	pgid, _ := startStubborn(t, a, pidFile)

	b := tenure("run", "--wait", "60s", "--ttl", "5s", "revoke-s9", "--", "sh", "-c", lookout, "sh", strconv.Itoa(pgid), out)
	var stderrB syncBuffer
	b.Stderr = &stderrB
	startBackground(t, b)
	waitOutput(t, &stderrB, "is held by", 30*time.Second)

	code, stdout, stderr := result(t, tenure("release", "--force", "revoke-s9"))
	if code != 0 || !strings.Contains(stdout, `revoked the lease on "revoke-s9"`) {
		t.Errorf("release --force: %d %s %s", code, stdout, stderr)
	}
	if strings.Contains(stderr, "--now") {
		t.Errorf("release --force without --now warned of an overlap: %s", stderr)
	}
	if code := exitOf(t, b, 60*time.Second); code != 0 {
		t.Fatalf("the second run exited %d: %s", code, stderrB.String())
	}
	checkLookout(t, out, pgid)
	if code := exitOf(t, a, 30*time.Second); code != exitLost {
		t.Errorf("the revoked run exited %d, want %d; stderr: %s", code, exitLost, stderrA.String())
	}
}

// TestReleaseForceConfirmed: a command that obeys SIGTERM is revoked; its
// tenure confirms once its group is gone, which frees the name at once
// (not at the old TTL, 5 minutes here), and says it was revoked. A second
// run started meanwhile finds nothing of the first group alive.
func TestReleaseForceConfirmed(t *testing.T) {
	dir := t.TempDir()
	pidFile, out := filepath.Join(dir, "pids"), filepath.Join(dir, "out")
	var stderrA bytes.Buffer
	obeying := `sleep 300 & echo $$ $! > "$1"; wait`
	a := tenure("run", "--ttl", "5m", "revoke-confirmed", "--", "sh", "-c", obeying, "sh", pidFile)
	a.Stderr = &stderrA
	pgid, _ := startStubborn(t, a, pidFile)
	b := tenure("run", "--wait", "60s", "revoke-confirmed", "--", "sh", "-c", lookout, "sh", strconv.Itoa(pgid), out)
	var stderrB syncBuffer
	b.Stderr = &stderrB
	startBackground(t, b)
	waitOutput(t, &stderrB, "is held by", 30*time.Second)

	if code, stdout, stderr := result(t, tenure("release", "--force", "revoke-confirmed")); code != 0 || !strings.Contains(stdout, "revoked") {
		t.Fatalf("release --force: %d %s %s", code, stdout, stderr)
	}
	if code := exitOf(t, a, 60*time.Second); code != exitLost {
		t.Errorf("the revoked run exited %d, want %d; stderr: %s", code, exitLost, stderrA.String())
	}
	if !strings.Contains(stderrA.String(), revokedText) {
		t.Errorf("the revoked run did not say it was revoked: %s", stderrA.String())
	}
	// Well within the old 5m TTL: only the confirmation frees it so soon.
	if code := exitOf(t, b, 60*time.Second); code != 0 {
		t.Fatalf("the second run exited %d: %s", code, stderrB.String())
	}
	checkLookout(t, out, pgid)
}

// TestReleaseForceCutOffHolder: a holder cut off from Redis never hears of
// its revocation and never confirms: status shows the name revoked, with
// the time left; the name is free when the old TTL runs out, and not
// before the first command is dead.
func TestReleaseForceCutOffHolder(t *testing.T) {
	dir := t.TempDir()
	pidFile, out := filepath.Join(dir, "pids"), filepath.Join(dir, "out")
	proxy := redistest.StartProxy(t, srv.Addr())
	var stderrA bytes.Buffer
	// A TTL that leaves room: status must read the marker before it
	// expires, two tenure commands after the cut, on a busy machine too.
	a := tenure("--redis", "redis://"+proxy.Addr(), "run", "--ttl", "12s", "revoke-cutoff", "--", "sh", "-c", stubborn, "sh", pidFile)
	a.Stderr = &stderrA
	pgid, _ := startStubborn(t, a, pidFile)
	proxy.BlackHole(true)

	if code, stdout, stderr := result(t, tenure("release", "--force", "revoke-cutoff")); code != 0 || !strings.Contains(stdout, "revoked") {
		t.Errorf("release --force: %d %s %s", code, stdout, stderr)
	}
	code, stdout, stderr := result(t, tenure("status", "--json", "revoke-cutoff"))
	if code != 0 || !strings.Contains(stdout, `"kind": "revoked"`) || !strings.Contains(stdout, `"revoked": "lease"`) {
		t.Errorf("status of a revoked name: %d %s %s", code, stdout, stderr)
	}
	if _, stdout, _ := result(t, tenure("status", "revoke-cutoff")); !strings.Contains(stdout, "revoked (a lease") {
		t.Errorf("status does not say revoked: %s", stdout)
	}
	if code, _, stderr := result(t, tenure("status", "--check", "revoke-cutoff")); code != 0 {
		t.Errorf("status --check of a revoked name: %d, want 0 (held): %s", code, stderr)
	}
	b := tenure("run", "--wait", "60s", "revoke-cutoff", "--", "sh", "-c", lookout, "sh", strconv.Itoa(pgid), out)
	if code, _, stderr := result(t, b); code != 0 {
		t.Fatalf("the second run exited %d: %s", code, stderr)
	}
	checkLookout(t, out, pgid)
	if code := exitOf(t, a, 30*time.Second); code != exitLost {
		t.Errorf("the cut-off run exited %d, want %d; stderr: %s", code, exitLost, stderrA.String())
	}
}

// TestReleaseForceLibraryHolder: a holder through the library is revoked
// too: its lease ends with lease.ErrLost at its next renewal, and the name
// stays barred (the library does not confirm) while the old TTL lasts, a
// minute here; --now then frees it at once, with a warning.
func TestReleaseForceLibraryHolder(t *testing.T) {
	ctx := context.Background()
	m, err := lease.New(client(t), lease.WithLogger(quietLogger()), lease.WithTTL(time.Minute), lease.WithRenewInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.Acquire(ctx, "revoke-lib")
	if err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := result(t, tenure("release", "--force", "revoke-lib")); code != 0 || !strings.Contains(stdout, "revoked") {
		t.Fatalf("release --force: %d %s %s", code, stdout, stderr)
	}
	select {
	case <-l.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the revoked lease never ended")
	}
	if !errors.Is(l.Err(), lease.ErrLost) {
		t.Errorf("the revoked lease ended with %v, want ErrLost", l.Err())
	}
	if _, err := m.TryAcquire(ctx, "revoke-lib"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a revoked name was acquired before its TTL ran out: %v", err)
	}
	// list and status --watch show it revoked too.
	if _, stdout, _ := result(t, tenure("list", "revoke-lib")); !strings.Contains(stdout, "revoked") {
		t.Errorf("list does not show the name revoked: %s", stdout)
	}
	wt := startWatching(t, tenure("status", "--watch", "revoke-lib"))
	if line := wt.next(t); !strings.Contains(line, "revoked lease") {
		t.Errorf("status --watch printed %q", line)
	}
	_ = wt.cmd.Process.Signal(syscall.SIGINT)
	exitOf(t, wt.cmd, 30*time.Second)
	if code, stdout, _ := result(t, tenure("release", "--force", "revoke-lib")); code != 0 || !strings.Contains(stdout, "already revoked") {
		t.Errorf("release --force of a revoked name: %d %s", code, stdout)
	}
	code, stdout, stderr := result(t, tenure("release", "--force", "--now", "revoke-lib"))
	if code != 0 || !strings.Contains(stdout, "removed the revocation") {
		t.Errorf("release --force --now of a revoked name: %d %s %s", code, stdout, stderr)
	}
	l2, err := m.TryAcquire(ctx, "revoke-lib")
	if err != nil {
		t.Fatalf("after --now the name is still barred: %v", err)
	}
	if code, _, stderr := result(t, tenure("release", "--force", "--now", "revoke-lib")); code != 0 ||
		!strings.Contains(stderr, "beside the next holder's") {
		t.Errorf("release --force --now of a held lease did not warn of the overlap: %d %s", code, stderr)
	}
	<-l2.Done()
}
