package main

// A newcomer's frictions (issue 43's table): each message says what it
// should, checked here.

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// TestSharedBehindWriterSays: a shared run that waits behind a waiting
// writer says who waits (the writer) and who holds (the readers). It said
// `"NAME" is held or awaited by a writer (1 permit ...)`, whose
// parentheses described the readers.
func TestSharedBehindWriterSays(t *testing.T) {
	reader := startHold(t, tenure("run", "--shared", "--holder", "reader-1", "shared-said"))
	writer := tenure("run", "--wait", "60s", "shared-said", "--", "true")
	var werr syncBuffer
	writer.Stderr = &werr
	startBackground(t, writer)
	waitOutput(t, &werr, "waiting for it", 30*time.Second)
	// The writer is in the fair queue once status counts it.
	for bound := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := client(t).ZCard(context.Background(), "tenure:{shared-said}:queue").Result(); n == 1 {
			break
		}
		if time.Now().After(bound) {
			t.Fatal("the writer never queued")
		}
	}
	code, _, stderr := result(t, tenure("run", "--shared", "--wait", "0", "shared-said", "--", "true"))
	want := `a writer waits for "shared-said", held by 1 permit of a semaphore or read lock (`
	if code != exitTimeout || !strings.Contains(stderr, want) || !strings.Contains(stderr, "holder reader-1") ||
		!strings.Contains(stderr, "a new reader waits behind the writers") {
		t.Errorf("a reader behind a waiting writer: %d %s; want %q", code, stderr, want)
	}
	reader.stdin.Close()
	exitOf(t, reader.cmd, 30*time.Second)
	if code := exitOf(t, writer, 60*time.Second); code != 0 {
		t.Errorf("the writer exited %d: %s", code, werr.String())
	}
	// And behind a writer that holds: the writer is named as such.
	w := startHold(t, tenure("run", "--holder", "writer-1", "shared-said"))
	code, _, stderr = result(t, tenure("run", "--shared", "--wait", "0", "shared-said", "--", "true"))
	if code != exitTimeout || !strings.Contains(stderr, `a writer holds "shared-said": writer-1`) {
		t.Errorf("a reader behind a writer: %d %s", code, stderr)
	}
	w.stdin.Close()
	exitOf(t, w.cmd, 30*time.Second)
}

// TestNoRenewalNewsAfterRelease: once a lease's release has started, -v
// says nothing of its renewals: with Redis stopped, a renewal that failed
// after the release had failed printed another "renewal failed;
// retrying" line.
func TestNoRenewalNewsAfterRelease(t *testing.T) {
	var buf syncBuffer
	w := newLeaseWatch(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), time.Minute)
	m, err := lease.New(client(t), lease.WithLogger(quietLogger()), lease.WithTTL(time.Minute), lease.WithHooks(w.hooks()))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	l, err := m.Acquire(ctx, "renewal-news")
	if err != nil {
		t.Fatal(err)
	}
	h := w.hooks()
	h.Renewed(l, errors.New("dial tcp: connection refused"))
	if !strings.Contains(buf.String(), "renewal failed") {
		t.Fatalf("a failed renewal while held is not logged: %s", buf.String())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	before := buf.String()
	h.Renewed(l, errors.New("dial tcp: connection refused"))
	h.Renewed(l, nil)
	if after := buf.String(); after != before {
		t.Errorf("renewals logged after the release:\n%s", strings.TrimPrefix(after, before))
	}
}
