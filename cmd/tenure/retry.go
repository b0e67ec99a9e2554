package main

// Outliving a Redis that fails while tenure waits: for it to answer at the
// start (run --wait), and for NAME (a restart, a failover).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/semaphore"
)

// connectWaiting is connectFor that waits out a Redis that does not
// answer, as a wait for a held name waits out a restart: while the
// connection fails as unreachable (exit 69: not a refusal, nor a usage
// error) it says so once on stderr (with wait, the --wait given) and tries
// again with the backoff of retrying, until wctx, which bounds the wait,
// ends; then the last failure stands, saying that the wait ran out.
func (g *globals) connectWaiting(wctx context.Context, feature, wait string) (*conns, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 100*time.Millisecond, 2*time.Second, 0
	said := false
	// cause is the last failure that says why Redis is unreachable: the
	// attempt that --wait's end cuts short fails only with "context
	// deadline exceeded", which says nothing of it.
	var cause error
	for {
		cs, err := g.connectFor(wctx, feature)
		var xe *exitErr
		if err == nil || !errors.As(err, &xe) || xe.code != exitRedis {
			return cs, err
		}
		if cause == nil || wctx.Err() == nil || !errors.Is(xe.err, context.DeadlineExceeded) {
			cause = xe.err
		}
		if !said {
			fmt.Fprintf(g.stderr, "tenure: %s; waiting for it (--wait %s)\n", oneLine(xe.Error()), wait)
			said = true
		}
		pause := b.NextBackOff()
		g.log.Warn("Redis unreachable; trying again", "err", xe.err, "after", pause)
		t := time.NewTimer(pause)
		select {
		case <-wctx.Done():
			t.Stop()
			return nil, fail(exitRedis, "%v; still unreachable when --wait %s ran out", cause, wait)
		case <-t.C:
		}
	}
}

// retrying is take(ctx, true) that outlives a Redis outage, as the
// election's campaign does: an attempt that fails on Redis (a restart, a
// failover, a dropped connection) is tried again with a growing pause
// (100ms doubling up to 2s) until ctx, which bounds the wait, ends; then
// the last failure is returned. A refusal or anything else is returned at
// once.
func (g *globals) retrying(ctx context.Context, take func(context.Context, bool) (*lease.Lease, error)) (*lease.Lease, error) {
	return retryTake(g, ctx, take)
}

// retryTake is retrying for any kind of hold (a Redisson lock's too).
func retryTake[H any](g *globals, ctx context.Context, take func(context.Context, bool) (H, error)) (H, error) {
	// The library's backoff (lease waits with it too): from 100ms,
	// doubling with jitter, up to 2s a pause, for as long as ctx allows.
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 100*time.Millisecond, 2*time.Second, 0
	for {
		l, err := take(ctx, true)
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return l, err
		}
		pause := b.NextBackOff()
		g.log.Warn("Redis failed while waiting; trying again", "err", err, "after", pause)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			var none H
			return none, fmt.Errorf("%w (Redis was failing when the wait ended)", err)
		case <-t.C:
		}
	}
}

// retryable reports whether err, from a waiting acquisition, is Redis
// failing, which a retry may mend.
func retryable(err error) bool {
	for _, e := range []error{lease.ErrNotAcquired, lease.ErrInvalidOption, lease.ErrInvalidName, lease.ErrClosed, errors.ErrUnsupported,
		semaphore.ErrLimitMismatch, errNotRedissonLock} {
		if errors.Is(err, e) {
			return false
		}
	}
	return refusal(err) == ""
}
