package main

// A "run --wait" that outlives a Redis restart, and one that waits for a
// Redis not yet up (retry.go).

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// TestRunWaitSurvivesRestart: a "run --wait" waiting for a held name goes
// on waiting through a Redis crash and restart, and runs its command once
// the holder releases.
func TestRunWaitSurvivesRestart(t *testing.T) {
	s := redistest.Start(t, redistest.Config{AOF: true})
	c := s.NewClient()
	defer c.Close()
	m, err := lease.New(c, lease.WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.TryAcquire(context.Background(), "restart", lease.WithTTL(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(t.TempDir(), "ran")
	waiter := on([]string{"REDIS_URL=" + s.URL()}, "-v", "run", "--wait", "2m", "restart", "--", "sh", "-c", `echo ran >> "$1"`, "sh", ran)
	stderr := &syncBuffer{}
	waiter.Stderr = stderr
	startBackground(t, waiter)
	for deadline := time.Now().Add(30 * time.Second); clientsSubscribed(t, s) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the waiting run never subscribed")
		}
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, stderr, "Redis failed while waiting; trying again", 60*time.Second)
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the waiter ran while the name was held")
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("releasing after the restart: %v", err)
	}
	if code := exitOf(t, waiter, 2*time.Minute); code != 0 {
		t.Fatalf("the waiter exited %d: %s", code, stderr.String())
	}
	waitFile(t, ran, 1, time.Second)
}

// TestRunWaitsForRedisAtStart: with --wait given, a Redis that does not
// answer at the start is waited for as a held name is, saying so once; a
// run that exited 69 at once now runs its command when Redis comes back.
// Without --wait it still exits 69 at once, and with a --wait that runs
// out, 69 saying so.
func TestRunWaitsForRedisAtStart(t *testing.T) {
	s := redistest.Start(t)
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	env := []string{"REDIS_URL=" + s.URL()}
	code, _, stderr := result(t, on(env, "run", "down-at-start", "--", "true"))
	if code != exitRedis || strings.Contains(stderr, "waiting for it") {
		t.Errorf("without --wait: status %d, want %d at once: %s", code, exitRedis, stderr)
	}
	code, _, stderr = result(t, on(env, "run", "--wait", "300ms", "down-at-start", "--", "true"))
	if code != exitRedis || !strings.Contains(stderr, "waiting for it (--wait 300ms)") ||
		!strings.Contains(stderr, "connection refused; still unreachable when --wait 300ms ran out") {
		// It said "context deadline exceeded; still unreachable ...".
		t.Errorf("--wait 300ms: status %d, want %d: %s", code, exitRedis, stderr)
	}

	ran := filepath.Join(t.TempDir(), "ran")
	waiter := on(env, "run", "--wait", "2m", "down-at-start", "--", "sh", "-c", `echo ran >> "$1"`, "sh", ran)
	out := &syncBuffer{}
	waiter.Stderr = out
	startBackground(t, waiter)
	waitOutput(t, out, "; waiting for it (--wait 2m0s)", 60*time.Second)
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, waiter, 2*time.Minute); code != 0 {
		t.Fatalf("the waiter exited %d: %s", code, out.String())
	}
	waitFile(t, ran, 1, time.Second)
	if n := strings.Count(out.String(), "waiting for it"); n != 1 {
		t.Errorf("said %d times that it waits: %s", n, out.String())
	}
}
