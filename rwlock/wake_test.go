package rwlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// A reader that died without unlocking keeps writers out for its own TTL
// and no longer: the read locks' set lives as long as its latest live
// permit, not as long as the longest one ever taken (S6).
func TestDeadReaderBlocksWriterOnlyForItsTTL(t *testing.T) {
	srv := redistest.Start(t)
	readers := newLocker(t, srv.Client(t))
	writer := newLocker(t, srv.Client(t))
	ctx := context.Background()
	a, err := readers.RLock(ctx, "doc", lease.WithTTL(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	b, err := readers.RLock(ctx, "doc", lease.WithTTL(500*time.Millisecond), lease.WithAutoRenew(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Before the fix the writer waited for a's ten minutes.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	w, err := writer.Lock(wctx, "doc")
	if err != nil {
		t.Fatalf("the writer, after the only live reader died: %v", err)
	}
	defer w.Release(ctx)
	select {
	case <-b.Done():
	default:
		t.Fatal("the writer got in while the dead reader's lock was live")
	}
}

// A writer that gives up its wait wakes the readers it held back: it was
// all that kept them out, and they must not wait out their backoff for it.
func TestWriterThatGivesUpWakesReaders(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	readers := newLocker(t, srv.Client(t))
	writer := newLocker(t, srv.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := readers.RLock(ctx, "page"); err != nil {
		t.Fatal(err)
	}
	wctx, giveUp := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		_, err := writer.Lock(wctx, "page")
		gaveUp <- err
	}()
	waitFor(t, func() bool { return raw.ZCard(ctx, "tenure:{page}:queue").Val() == 1 })

	// A reader that would poll only every 20 s.
	slow := func() backoff.BackOff { return backoff.NewConstantBackOff(20 * time.Second) }
	reader := make(chan error, 1)
	go func() {
		// Released after the test's checks only: a release publishes too.
		_, err := readers.RLock(ctx, "page", lease.WithBackOff(slow))
		reader <- err
	}()
	sub := raw.Subscribe(ctx, "tenure:{page}:released")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		return raw.PubSubNumSub(ctx, "tenure:{page}:released").Val()["tenure:{page}:released"] >= 2
	})
	giveUp()
	if err := <-gaveUp; !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("the writer that gave up: %v", err)
	}
	// The cause, not a duration: leaving the queue told the waiters.
	if _, err := sub.ReceiveMessage(ctx); err != nil {
		t.Fatalf("no wake-up after the writer left the queue: %v", err)
	}
	if err := <-reader; err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30 s")
		}
	}
}
