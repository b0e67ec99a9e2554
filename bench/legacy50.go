package main

// The scripts before issue 50, for the before-and-after rows of scenarios 6
// (floor) and 9 (layout) in one run: the library's acquire.lua and
// release.lua of commit 33b741b (main before issue 50), copied verbatim
// into bench/legacy50, with the files they were built from, and run on the
// same keys (the lock key, the fencing counter P{N}:fence, the release
// marker P{N}:retired:<op>). Only the plain barging lease's cycle: what
// the figure measures. Issue 50 kept the layout and put each
// script's common case first (acquire_lease.lua, release_lease.lua), ahead
// of the Lua functions the other cases use.

import (
	"context"
	_ "embed"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/lease"
)

var (
	//go:embed legacy50/fence.lua
	legacyFence string
	//go:embed legacy50/queue.lua
	legacyQueue string
	//go:embed legacy50/acquire.lua
	legacyAcquireSrc string
	//go:embed legacy50/publish.lua
	legacyPublish string
	//go:embed legacy50/letgo.lua
	legacyLetgo string
	//go:embed legacy50/release.lua
	legacyReleaseSrc string

	legacyAcquire = redis.NewScript(legacyFence + legacyQueue + legacyAcquireSrc)
	legacyRelease = redis.NewScript(legacyPublish + legacyLetgo + legacyReleaseSrc)
)

// legacyTake acquires name with the old acquire.lua, as lease.Manager did
// before issue 50 (its keys and arguments).
func legacyTake(ctx context.Context, c *redis.Client, l keys.Layout, name, tok string, ttl time.Duration) error {
	ks := []string{l.Lease(name), l.Fence(name), l.Retired(name, tok), l.Queue(name), l.QueueExpiry(name)}
	f, err := legacyAcquire.Run(ctx, c, ks, tok, ttl.Milliseconds()).Result()
	if err != nil {
		return err
	}
	if _, ok := f.(int64); !ok {
		return errFloorNotTaken
	}
	return nil
}

// legacyLetGo releases it with the old release.lua (the release's op is
// the lease's token, as it was).
func legacyLetGo(ctx context.Context, c *redis.Client, l keys.Layout, name, tok string, ttl time.Duration) error {
	n, err := legacyRelease.Run(ctx, c, []string{l.Lease(name), l.Retired(name, tok)}, tok, keys.RetiredFree(ttl).Milliseconds()).Int()
	if err == nil && n != 1 {
		err = errFloorNotHeld
	}
	return err
}

// legacy is floor's variant of the layout before issue 50.
func (k *floorKit) legacy(c *redis.Client) (floorCycle, func() error, error) {
	return func(ctx context.Context, name string) error {
		tok := k.token()
		if err := legacyTake(ctx, c, k.layout, name, tok, floorTTL); err != nil {
			return err
		}
		return legacyLetGo(ctx, c, k.layout, name, tok, floorTTL)
	}, floorNoDone, nil
}

// legacyLocker is layout's variant of the layout before issue 50, under
// the manager's default prefix as lease.Manager's variant runs: a fresh
// name is always free, so it neither waits nor retries.
type legacyLocker struct {
	c   *redis.Client
	ttl time.Duration
	seq atomic.Uint64
}

func (p *legacyLocker) acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	tok := nextToken(&p.seq)
	l := keys.Layout{Prefix: lease.DefaultKeyPrefix}
	if err := legacyTake(ctx, p.c, l, name, tok, p.ttl); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return legacyLetGo(ctx, p.c, l, name, tok, p.ttl) }, nil
}

func (p *legacyLocker) close() error { return nil }

// backendLocker is layout's variant of this build's scripts through
// internal/backend, without lease.Manager: the same path as legacyLocker's
// (one script call to acquire, one to release), so that the two rows
// differ in their scripts alone.
type backendLocker struct {
	be  *backend.Redis
	ttl time.Duration
	seq atomic.Uint64
}

func (p *backendLocker) acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	tok := nextToken(&p.seq)
	a, err := p.be.Acquire(ctx, backend.Request{Name: name, Token: tok, TTL: p.ttl})
	switch {
	case err != nil:
		return nil, err
	case !a.Acquired:
		return nil, errFloorNotTaken
	}
	return func(ctx context.Context) error {
		errs := []error{nil}
		p.be.Release(ctx, []backend.Item{{Name: name, Token: tok, TTL: p.ttl}}, errs)
		return errs[0]
	}, nil
}

func (p *backendLocker) close() error { return nil }
