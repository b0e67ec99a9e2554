package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/redistest"
	"github.com/tenure-go/tenure/lease"
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
