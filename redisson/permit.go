package redisson

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// A Permit is one permit of an RPermitExpirableSemaphore that this Client
// took (PermitSemaphore.Acquire): its id is the one a Java client would
// have been given, and any client may release it by that id.
//
// Redisson never renews a permit: it lives for the lease time it was
// taken with, or until released when taken without one. tenure keeps
// those semantics rather than adding a watchdog, for a renewal would be
// UpdateLeaseTime, which moves the expiry in the renewer's clock and is
// refused once any client has reclaimed the permit; a Java peer expects a
// permit to end at the time written when it was taken, and sizes its own
// work that way. What a Go Permit adds is its Context: cancelled, with a
// cause wrapping lease.ErrLost, at a local deadline before the permit's
// expiry in this host's clock (sent + leaseTime − drift, sent being when
// the acquire, or the last UpdateLeaseTime, was sent; WithDrift), so that
// Go work stops before any client whose clock agrees with this one could
// reclaim the permit. A client whose clock runs ahead of this one can
// reclaim it earlier, and nothing here can tell: keep the clocks of the
// services that share a semaphore in step, and leases long beside their
// skew.
//
// Nothing tells a holder that another client released its permit by its
// id, or reclaimed it: a Go Permit finds out at its next UpdateLeaseTime
// or Release (lease.ErrNotHeld), a Java holder never.
//
// A Permit is safe for concurrent use.
type Permit struct {
	s      *PermitSemaphore
	id     []byte
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	deadline time.Time   // the local deadline; zero without a lease time
	timer    *time.Timer // ends ctx at deadline
}

// ID returns the permit's id: 32 lowercase hex digits, as Redisson's.
func (p *Permit) ID() string { return hex.EncodeToString(p.id) }

// Semaphore returns the semaphore the permit is of.
func (p *Permit) Semaphore() *PermitSemaphore { return p.s }

// Context returns a context that ends when the permit does: at its local
// deadline (cause wrapping lease.ErrLost), when UpdateLeaseTime finds it
// gone (lease.ErrLost), on Release (lease.ErrReleased) or when the Client
// closes (lease.ErrClosed).
func (p *Permit) Context() context.Context { return p.ctx }

// Done is Context().Done().
func (p *Permit) Done() <-chan struct{} { return p.ctx.Done() }

// Err returns why the permit ended (its context's cause), or nil.
func (p *Permit) Err() error {
	if p.ctx.Err() == nil {
		return nil
	}
	return context.Cause(p.ctx)
}

// Deadline returns the local deadline, before which the permit is held
// as far as this host's clock can tell, and false for a permit taken
// without a lease time.
func (p *Permit) Deadline() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deadline, !p.deadline.IsZero()
}

// Release gives the permit back, as Java's release(permitId), and ends
// its context with lease.ErrReleased. A permit that was not there any
// more (released, or reclaimed by someone once expired in their clock)
// is an error wrapping lease.ErrNotHeld; so is one that had expired in
// this host's clock, though it is then given back, as Java's does.
func (p *Permit) Release(ctx context.Context) error {
	err := p.s.Release(ctx, p.ID())
	if errors.Is(err, lease.ErrNotHeld) {
		p.end(lease.ErrReleased)
	}
	return err
}

// UpdateLeaseTime gives the permit a new lease time from now, as Java's
// updateLeaseTime (zero: none), and moves the local deadline with it. A
// permit no longer there (expiry passed in this host's clock, reclaimed,
// or released) is not brought back: that is an error wrapping
// lease.ErrNotHeld, and the context ends with lease.ErrLost. So is a
// permit whose context had already ended: its work was told to stop.
func (p *Permit) UpdateLeaseTime(ctx context.Context, leaseTime time.Duration) error {
	s := p.s
	if leaseTime < 0 {
		return invalid("negative lease time %v", leaseTime)
	}
	if err := p.Err(); err != nil {
		return fmt.Errorf("%w: %q: permit %s ended: %w", lease.ErrNotHeld, s.name, p.ID(), err)
	}
	sent := time.Now()
	expiry := foreverMs
	if leaseTime > 0 {
		expiry = sent.UnixMilli() + ms(leaseTime)
	}
	keys := []string{s.raw, s.timeouts, s.channel}
	n, err := semUpdateScript.Run(ctx, s.c.c, keys, p.id, expiry, sent.UnixMilli(), s.c.publish).Int64()
	if err != nil {
		return err
	}
	if n == 0 {
		p.end(fmt.Errorf("%w: redisson permit %s of %q: gone at an UpdateLeaseTime", lease.ErrLost, p.ID(), s.raw))
		return fmt.Errorf("%w: %q: permit %s was released or reclaimed", lease.ErrNotHeld, s.name, p.ID())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		// The local deadline passed while the update was on its way.
		return fmt.Errorf("%w: %q: permit %s ended: %w", lease.ErrNotHeld, s.name, p.ID(), context.Cause(p.ctx))
	}
	p.arm(sent, leaseTime)
	return nil
}

// arm sets the local deadline for a lease time from sent, under p.mu.
func (p *Permit) arm(sent time.Time, leaseTime time.Duration) {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.deadline = time.Time{}
	if leaseTime == 0 {
		return
	}
	p.deadline = sent.Add(leaseTime - p.s.c.cfg.drift(leaseTime))
	p.timer = time.AfterFunc(time.Until(p.deadline), func() {
		p.end(fmt.Errorf("%w: redisson permit %s of %q: its lease time ran out in this host's clock", lease.ErrLost, p.ID(), p.s.raw))
	})
}

// end ends the permit's context with cause (the first cause stays) and
// forgets it in the Client.
func (p *Permit) end(cause error) {
	p.mu.Lock()
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.mu.Unlock()
	p.cancel(cause)
	p.s.c.permits.forget(p)
}

// permitSet is the permits a Client holds, so that Close gives them back
// and a Release by id ends the Permit it names, found at once however
// many the Client holds.
type permitSet struct {
	mu     sync.Mutex
	live   map[permitKey]*Permit
	closed bool
}

// permitKey names a permit: its semaphore's key and its id's bytes.
type permitKey struct{ raw, id string }

func (p *Permit) key() permitKey { return permitKey{p.s.raw, string(p.id)} }

// add records a permit the server granted, or gives it back at once when
// the Client closed meanwhile.
func (ps *permitSet) add(s *PermitSemaphore, id []byte, sent time.Time, leaseTime time.Duration) (*Permit, error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	p := &Permit{s: s, id: id, ctx: ctx, cancel: cancel}
	ps.mu.Lock()
	if ps.closed {
		ps.mu.Unlock()
		cancel(lease.ErrClosed)
		rctx, rcancel := context.WithTimeout(context.Background(), s.c.cfg.opTimeout)
		defer rcancel()
		_, _ = s.release(rctx, id)
		return nil, fmt.Errorf("%w: %q: %w", lease.ErrNotAcquired, s.name, lease.ErrClosed)
	}
	if ps.live == nil {
		ps.live = map[permitKey]*Permit{}
	}
	ps.live[p.key()] = p
	p.mu.Lock()
	p.arm(sent, leaseTime)
	p.mu.Unlock()
	ps.mu.Unlock()
	return p, nil
}

// endID ends the live permit of s with the id raw, if this Client holds
// it, with cause.
func (ps *permitSet) endID(s *PermitSemaphore, raw []byte, cause error) {
	ps.mu.Lock()
	p := ps.live[permitKey{s.raw, string(raw)}]
	ps.mu.Unlock()
	if p != nil {
		p.end(cause)
	}
}

// forget drops p, and only p: a key is p's own (ids are random).
func (ps *permitSet) forget(p *Permit) {
	ps.mu.Lock()
	if ps.live[p.key()] == p {
		delete(ps.live, p.key())
	}
	ps.mu.Unlock()
}

// close gives back every permit still live (an id already reclaimed is
// left alone by the script: it cannot give back another's permit), and
// ends each with lease.ErrClosed.
func (ps *permitSet) close(opTimeout time.Duration) []error {
	ps.mu.Lock()
	ps.closed = true
	live := make([]*Permit, 0, len(ps.live))
	for _, p := range ps.live {
		live = append(live, p)
	}
	ps.live = nil
	ps.mu.Unlock()
	var errs []error
	for _, p := range live {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		if _, err := p.s.release(ctx, p.id); err != nil {
			errs = append(errs, err)
		}
		cancel()
		p.end(lease.ErrClosed)
	}
	return errs
}
