package redisson

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// A MultiLock is several locks of one Client taken as one, as Redisson's
// RedissonMultiLock (RedissonClient.getMultiLock): all or none, one owner
// for every name, each hold renewed by the Client's one watchdog. It is
// safe for concurrent use, and takes nothing by itself.
//
// Its locks are taken one after another in one fixed order, by Key (the
// mapped name), whatever order they were given in, so that two
// MultiLocks over the same names never wait for each other in a circle:
// Redisson takes them in the order given, and breaks such a circle only
// by giving everything back after a wait time and starting over. A Lock
// holds the names it has while it waits for the next one; a name that
// cannot be had (TryLock refused it, ctx ended, an error) makes it
// unlock every name it took before it returns, and the error names that
// name.
type MultiLock struct {
	c     *Client
	locks []*Lock // by Key
}

// GetMultiLock returns a MultiLock over locks, of any kinds (RLock,
// RFencedLock, RFairLock, either half of an RReadWriteLock), which must
// all be this Client's, each on a name of its own. Unlike the other
// Get methods it returns an error, wrapping lease.ErrInvalidOption, for a
// set that could never be taken: none, a nil one, one of another Client
// (whose watchdog and Close are not this one's), two on one hash (a
// name's plain, fair and read-write locks share it), or one with a bad
// name (lease.ErrInvalidName).
func (c *Client) GetMultiLock(locks ...*Lock) (*MultiLock, error) {
	if len(locks) == 0 {
		return nil, invalid("a multi lock needs at least one lock")
	}
	sorted := make([]*Lock, len(locks))
	for i, l := range locks {
		switch {
		case l == nil:
			return nil, invalid("lock %d of the multi lock is nil", i)
		case l.c != c:
			return nil, invalid("lock %q is of another Client: a multi lock's locks share its Client's watchdog and owner", l.name)
		case l.err != nil:
			return nil, l.err
		}
		sorted[i] = l
	}
	slices.SortStableFunc(sorted, func(a, b *Lock) int { return strings.Compare(a.raw, b.raw) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].raw == sorted[i-1].raw {
			return nil, invalid("two locks on the hash %q (%s and %s): a multi lock takes each name once", sorted[i].raw, sorted[i-1].kind, sorted[i].kind)
		}
	}
	return &MultiLock{c: c, locks: sorted}, nil
}

// Locks returns the locks in the order they are taken, by Key.
func (m *MultiLock) Locks() []*Lock { return slices.Clone(m.locks) }

// Lock takes every lock for the owner ctx carries (WithOwner; a fresh one
// if none, the same for every name), each as Lock.Lock does: waiting
// while another holds it, entering again where the owner holds it
// already. ctx bounds the whole wait, not the hold. When ctx ends, or a
// name fails, every name taken is unlocked before it returns an error
// wrapping lease.ErrNotAcquired that names the name. A hold that ends
// while a later name is waited for (lost, or run out) makes it give every
// name back and start over.
func (m *MultiLock) Lock(ctx context.Context) (*MultiHold, error) {
	return m.take(ctx, true, func(l *Lock, ctx context.Context) (*Hold, error) { return l.Lock(ctx) })
}

// TryLock is Lock without waiting: when any name is held by another
// owner it unlocks the names it took and returns an error wrapping
// lease.ErrNotAcquired that names it, as Redisson's tryLock().
func (m *MultiLock) TryLock(ctx context.Context) (*MultiHold, error) {
	return m.take(ctx, false, func(l *Lock, ctx context.Context) (*Hold, error) { return l.TryLock(ctx) })
}

// LockFor is Lock with a fixed lease for every name, as Lock.LockFor:
// each hash lives leaseTime from its own request and is never renewed.
// The names taken first spend their lease while later ones are waited
// for, and the MultiHold ends when its first hold does (Deadline).
// Redisson's tryLock(waitTime, leaseTime) takes each lock for twice the
// wait time and then sets every one to leaseTime; tenure never sets a
// held lease's TTL again (ErrLeaseReentry says why), so use Lock, renewed
// by the watchdog, when the wait may be long beside the lease.
func (m *MultiLock) LockFor(ctx context.Context, leaseTime time.Duration) (*MultiHold, error) {
	if err := m.checkLease(leaseTime); err != nil {
		return nil, err
	}
	return m.take(ctx, true, func(l *Lock, ctx context.Context) (*Hold, error) { return l.LockFor(ctx, leaseTime) })
}

// TryLockFor is TryLock with a fixed lease for every name: see LockFor.
func (m *MultiLock) TryLockFor(ctx context.Context, leaseTime time.Duration) (*MultiHold, error) {
	if err := m.checkLease(leaseTime); err != nil {
		return nil, err
	}
	return m.take(ctx, false, func(l *Lock, ctx context.Context) (*Hold, error) { return l.TryLockFor(ctx, leaseTime) })
}

// checkLease returns why leaseTime is no lease for one of the locks
// (Lock.LockFor says which), before any name is taken.
func (m *MultiLock) checkLease(leaseTime time.Duration) error {
	for _, l := range m.locks {
		if err := l.checkLease(leaseTime); err != nil {
			return fmt.Errorf("%w (lock %q)", err, l.name)
		}
	}
	return nil
}

// IsHeldByOwner reports whether the owner ctx carries holds every lock,
// as Redisson's isHeldByThread: false when ctx carries none.
func (m *MultiLock) IsHeldByOwner(ctx context.Context) (bool, error) {
	for _, l := range m.locks {
		ok, err := l.IsHeldByOwner(ctx)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// take takes every lock in order with one, under one owner; with wait it
// starts over when a hold ended before the last name was had.
func (m *MultiLock) take(ctx context.Context, wait bool, one func(*Lock, context.Context) (*Hold, error)) (*MultiHold, error) {
	if _, ok := OwnerFrom(ctx); !ok {
		// One owner for every name, as Redisson's one thread id: the
		// MultiHold's context then enters each name again.
		ctx = WithOwner(ctx, Owner{ClientID: m.c.id, ThreadID: newThreadID()})
	}
	for {
		holds, gone, err := m.takeAll(ctx, one)
		switch {
		case err != nil:
			return nil, err
		case gone == nil:
			return m.newMultiHold(ctx, holds), nil
		case !wait:
			return nil, m.giveUp(ctx, holds, fmt.Errorf("%w: %q ended before the last name was taken: %w", lease.ErrNotAcquired, gone.Name(), endedWhy(gone)))
		}
		// An unlock that fails leaves its name to its TTL, unrenewed;
		// the next round re-enters it under the same owner meanwhile.
		_ = m.giveUp(ctx, holds, nil)
	}
}

// ended reports whether h may no longer be handed over: it ended, or its
// local deadline passed before its timer ended it.
func ended(h *Hold) bool {
	return h.Err() != nil || !time.Now().Before(h.Deadline())
}

// endedWhy is why h ended, for ended(h).
func endedWhy(h *Hold) error {
	if err := h.Err(); err != nil {
		return err
	}
	return errors.New("its local deadline passed")
}

// takeAll takes the locks in order. It returns them all, or, when a hold
// ended before the last name was taken, the holds taken and that one, or
// an error once it has unlocked every hold taken.
func (m *MultiLock) takeAll(ctx context.Context, one func(*Lock, context.Context) (*Hold, error)) ([]*Hold, *Hold, error) {
	holds := make([]*Hold, 0, len(m.locks))
	for _, l := range m.locks {
		h, err := one(l, ctx)
		if err != nil {
			return nil, nil, m.giveUp(ctx, holds, fmt.Errorf("redisson: multi lock of %d names: %q: %w", len(m.locks), l.name, err))
		}
		holds = append(holds, h)
		for _, taken := range holds {
			if ended(taken) {
				return holds, taken, nil
			}
		}
	}
	return holds, nil, nil
}

// giveUp unlocks holds, the last taken first, and returns why joined with
// what the unlocks answered. Its round trips are bounded by the op
// timeout, not ctx, which may be why it gives up. A hold that had ended
// answers lease.ErrNotHeld, which is no news here.
func (m *MultiLock) giveUp(ctx context.Context, holds []*Hold, why error) error {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.c.cfg.opTimeout)
	defer cancel()
	errs := []error{why}
	for i := len(holds) - 1; i >= 0; i-- {
		if err := holds[i].Unlock(uctx); err != nil && !errors.Is(err, lease.ErrNotHeld) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// A MultiHold is what a MultiLock took: a Hold on each of its names, all
// of one owner. Unlock it once. A nil *MultiHold holds nothing and its
// methods do not panic.
type MultiHold struct {
	holds  []*Hold // by Key
	ctx    context.Context
	cancel context.CancelCauseFunc
	stops  []func() bool // the hooks from each hold's context to ctx

	mu       sync.Mutex
	unlocked bool
}

func (m *MultiLock) newMultiHold(ctx context.Context, holds []*Hold) *MultiHold {
	mctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	mh := &MultiHold{holds: holds, ctx: mctx, cancel: cancel}
	for _, h := range holds {
		hctx := h.Context()
		mh.stops = append(mh.stops, context.AfterFunc(hctx, func() { cancel(context.Cause(hctx)) }))
		if hctx.Err() != nil {
			// AfterFunc runs its function in a goroutine of its own: the
			// MultiHold is to have ended by the time it is returned.
			cancel(context.Cause(hctx))
		}
	}
	return mh
}

var errNilMultiHold = fmt.Errorf("%w: nil multi hold (its Lock failed)", lease.ErrNotHeld)

// Holds returns the hold on each name, in the order they were taken (by
// Key).
func (mh *MultiHold) Holds() []*Hold {
	if mh == nil {
		return nil
	}
	return slices.Clone(mh.holds)
}

// Owner returns the owner that holds every name.
func (mh *MultiHold) Owner() Owner {
	if mh == nil {
		return Owner{}
	}
	return mh.holds[0].Owner()
}

// Context returns a context that carries the owner (a MultiLock, or a
// Lock of one of its names, taken under it enters again) and ends when
// any of the holds ends, with that hold's cause: lease.ErrLost (and the
// name) when one is lost or its lease ran out, lease.ErrClosed when the
// Client closes, lease.ErrReleased on Unlock. It ends no later than the
// earliest hold's local deadline.
func (mh *MultiHold) Context() context.Context {
	if mh == nil {
		return nilCtx
	}
	return mh.ctx
}

// Done is Context().Done().
func (mh *MultiHold) Done() <-chan struct{} { return mh.Context().Done() }

// Err returns nil while every name is held, then why not: the cause of
// Context.
func (mh *MultiHold) Err() error {
	if mh == nil {
		return errNilMultiHold
	}
	if mh.ctx.Err() == nil {
		return nil
	}
	return context.Cause(mh.ctx)
}

// Deadline returns the earliest local deadline of the holds.
func (mh *MultiHold) Deadline() time.Time {
	if mh == nil {
		return time.Time{}
	}
	d := mh.holds[0].Deadline()
	for _, h := range mh.holds[1:] {
		if hd := h.Deadline(); hd.Before(d) {
			d = hd
		}
	}
	return d
}

// Unlock ends the Context (lease.ErrReleased, unless a hold had ended it
// first), so that work under it stops before any name is let go, then
// unlocks every hold, the last taken first, as Hold.Unlock does. It
// returns the unlocks' errors joined: one wrapping lease.ErrNotHeld for
// each name no longer held (lost, or unlocked through Holds). A second
// Unlock changes nothing and returns an error wrapping lease.ErrNotHeld.
func (mh *MultiHold) Unlock(ctx context.Context) error {
	if mh == nil {
		return errNilMultiHold
	}
	mh.mu.Lock()
	if mh.unlocked {
		mh.mu.Unlock()
		return fmt.Errorf("%w: multi hold unlocked already", lease.ErrNotHeld)
	}
	mh.unlocked = true
	mh.mu.Unlock()
	mh.cancel(lease.ErrReleased)
	var errs []error
	for i := len(mh.holds) - 1; i >= 0; i-- {
		if err := mh.holds[i].Unlock(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, stop := range mh.stops {
		stop()
	}
	return errors.Join(errs...)
}
