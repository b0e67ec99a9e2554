package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

func TestDoReleasesAndReportsLoss(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t), lease.WithTTL(time.Second), lease.WithRenewInterval(100*time.Millisecond))
	ctx := context.Background()

	boom := errors.New("boom")
	err := m.Do(ctx, "job", func(ctx context.Context) error {
		if raw.Exists(ctx, "tenure:{job}").Val() != 1 {
			t.Error("fn ran without the lease")
		}
		return boom
	})
	if err != boom {
		t.Fatalf("Do = %v, want fn's error", err)
	}
	if raw.Exists(ctx, "tenure:{job}").Val() != 0 {
		t.Fatal("Do left the lease behind")
	}

	err = m.Do(ctx, "job", func(ctx context.Context) error {
		raw.Set(ctx, "tenure:{job}", "intruder", time.Minute)
		<-ctx.Done()
		if context.Cause(ctx) != lease.ErrLost {
			t.Errorf("fn's cause %v", context.Cause(ctx))
		}
		return nil
	})
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Do after loss = %v", err)
	}
	if raw.Get(ctx, "tenure:{job}").Val() != "intruder" {
		t.Fatal("Do released another holder's lease")
	}

	cctx, cancel := context.WithCancel(ctx)
	err = m.Do(cctx, "other", func(ctx context.Context) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, lease.ErrLost) {
		t.Fatalf("Do with cancelled ctx = %v", err)
	}
	if raw.Exists(ctx, "tenure:{other}").Val() != 0 {
		t.Fatal("Do did not release after its ctx was cancelled")
	}
}

func TestDoReleasesOnPanic(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t))
	func() {
		defer func() { _ = recover() }()
		_ = m.Do(context.Background(), "job", func(context.Context) error { panic("boom") })
	}()
	if raw.Exists(context.Background(), "tenure:{job}").Val() != 0 {
		t.Fatal("a panicking fn left its lease behind")
	}
}
