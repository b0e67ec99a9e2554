package main

// A holder (run, elect) that notices "release --force" at once: it listens
// on the name's release channel and checks its lease on each message.

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/lease"
)

// watchReleases makes the holder of l notice "release --force" at once: a
// lease taken from its holder is otherwise found gone only at its next
// renewal, TTL/3 later (10s with the default TTL). It listens on the
// name's release channel, on which release --force publishes (as every
// release of the name does, and a permit's), and on each message checks
// the lease with an Extend to its TTL: one renewal, early. An Extend that
// finds the key gone or taken over loses the lease (its context ends
// with lease.ErrLost, the loss reported as for a renewal), and whoever
// holds it stops as for any loss. Messages that come while a check runs
// are folded into one more check. The returned stop ends the listening
// and waits for it, but not for its connections to close; it may be
// called more than once.
func watchReleases(cs *conns, prefix string, l *lease.Lease, ttl time.Duration, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	channel := keys.Layout{Prefix: prefix}.Channel(l.Name())
	poke := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for _, n := range cs.nodes {
		// Every quorum node gets release --force's message; on a Cluster
		// it is a sharded message, heard on the name's primary alone.
		subscribe := n.c.Subscribe
		if backend.Sharded(n.c) {
			subscribe = n.c.SSubscribe
		}
		ps := subscribe(ctx, channel)
		wg.Go(func() { listen(ctx, ps, poke) })
		// Closed apart, and not waited for: go-redis holds a PubSub's lock
		// while it reconnects (dials, sends HELLO), and closing it waits
		// for that, up to the read timeout, on a Redis that does not
		// answer. stop is called on a loss, on the way to tenure's exit,
		// which must not wait on it (TestCutOffHoldExitsFirst); the
		// connection goes with the process if not before.
		go func() {
			<-ctx.Done()
			_ = ps.Close()
		}()
	}
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-l.Done():
				return
			case <-poke:
			}
			if lost := check(ctx, l, ttl); lost {
				log.Info("a release of the name was published: the lease was checked at once, and found lost",
					"name", l.Name(), "fence", l.Fence())
				return
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
}

// listen pokes (without blocking) on every message ps receives, until ctx
// ends.
func listen(ctx context.Context, ps *redis.PubSub, poke chan<- struct{}) {
	msgs := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-msgs:
			if !ok {
				return
			}
			select {
			case poke <- struct{}{}:
			default:
			}
		}
	}
}

// check renews l now, within a renewal interval, and reports whether it
// found l lost. Any other outcome (renewed, or Redis not answering) leaves
// l to its renewals.
func check(ctx context.Context, l *lease.Lease, ttl time.Duration) (lost bool) {
	ctx, cancel := context.WithTimeout(ctx, renewInterval(ttl))
	defer cancel()
	err := l.Extend(ctx, ttl)
	return errors.Is(err, lease.ErrNotHeld) && errors.Is(l.Err(), lease.ErrLost)
}
