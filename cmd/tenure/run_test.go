package main

// "tenure run" with a command: runs never overlap, a lost lease stops the
// command, signals reach it.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

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
		}, `it was taken over by another holder, or revoked by "tenure release --force" (the server holds another token)`, "intruder"},
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
