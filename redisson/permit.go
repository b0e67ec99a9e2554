package redisson

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

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
	unknown  bool        // an update went unanswered: give it back when ctx ends
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
//
// A shorter lease moves the local deadline before the request is sent, to
// sent + leaseTime − drift: the server may apply it whatever becomes of
// the reply, and a failed update leaves it moved. A permit whose context
// ended while the update was on its way, and that the server updated, is
// given back. So is one whose update went unanswered (the server may have
// made its lease longer, or endless), once its context ends; until given
// back it stays with the Client, whose Close gives it back.
func (p *Permit) UpdateLeaseTime(ctx context.Context, leaseTime time.Duration) error {
	s := p.s
	if leaseTime < 0 {
		return invalid("negative lease time %v", leaseTime)
	}
	sent := time.Now()
	if err := p.shorten(sent, leaseTime); err != nil {
		return fmt.Errorf("%w: %q: permit %s ended: %w", lease.ErrNotHeld, s.name, p.ID(), err)
	}
	expiry := foreverMs
	if leaseTime > 0 {
		expiry = sent.UnixMilli() + ms(leaseTime)
	}
	keys := []string{s.raw, s.timeouts, s.channel}
	n, err := semUpdateScript.Run(ctx, s.c.c, keys, p.id, expiry, sent.UnixMilli(), s.c.publish).Int64()
	var re redis.Error
	switch {
	case errors.As(err, &re):
		return err // refused: nothing was applied
	case err != nil:
		p.unsure()
		return err
	case n == 0:
		p.end(fmt.Errorf("%w: redisson permit %s of %q: gone at an UpdateLeaseTime", lease.ErrLost, p.ID(), s.raw))
		return fmt.Errorf("%w: %q: permit %s was released or reclaimed", lease.ErrNotHeld, s.name, p.ID())
	}
	p.mu.Lock()
	if p.lapsed() {
		// The local deadline passed while the update was on its way,
		// and the server applied it: nothing else would give it back.
		// Its timer, if still to fire, gives it back too.
		p.unknown = true
		p.mu.Unlock()
		p.giveBack()
		return fmt.Errorf("%w: %q: permit %s ended: %w", lease.ErrNotHeld, s.name, p.ID(), context.Cause(p.ctx))
	}
	p.unknown = false
	p.arm(sent, leaseTime)
	p.mu.Unlock()
	return nil
}

// shorten moves the local deadline to what a lease time of leaseTime sent
// at sent gives, if that is earlier, or returns why the permit ended.
func (p *Permit) shorten(sent time.Time, leaseTime time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lapsed() {
		return context.Cause(p.ctx)
	}
	if leaseTime == 0 {
		return nil
	}
	if d := sent.Add(leaseTime - p.s.c.cfg.drift(leaseTime)); p.deadline.IsZero() || d.Before(p.deadline) {
		p.setDeadline(d)
	}
	return nil
}

// unsure follows an update whose outcome is unknown: the permit is given
// back when its context ends (now, if it has).
func (p *Permit) unsure() {
	p.mu.Lock()
	p.unknown = true
	ended := p.lapsed()
	p.mu.Unlock()
	if ended {
		p.giveBack()
	}
}

// arm sets the local deadline for a lease time from sent, under p.mu.
func (p *Permit) arm(sent time.Time, leaseTime time.Duration) {
	if leaseTime == 0 {
		p.setDeadline(time.Time{})
		return
	}
	p.setDeadline(sent.Add(leaseTime - p.s.c.cfg.drift(leaseTime)))
}

// setDeadline sets the local deadline (zero: none) and the timer that
// ends the permit then, under p.mu.
func (p *Permit) setDeadline(d time.Time) {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.deadline = d
	if !d.IsZero() {
		p.timer = time.AfterFunc(time.Until(d), p.expire)
	}
}

// inTime reports whether p may be handed over: its context has not ended
// and its deadline, if any, has not passed.
func (p *Permit) inTime() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.lapsed()
}

// lapsed reports, under p.mu, whether the permit has ended, ending it
// first if its deadline has passed before its timer did: what is decided
// under p.mu never finds the deadline passed and the context live.
func (p *Permit) lapsed() bool {
	if p.ctx.Err() == nil && !p.deadline.IsZero() && !time.Now().Before(p.deadline) {
		p.cancel(p.expired())
	}
	return p.ctx.Err() != nil
}

// expired is the cause of a permit's end at its local deadline.
func (p *Permit) expired() error {
	return fmt.Errorf("%w: redisson permit %s of %q: its lease time ran out in this host's clock", lease.ErrLost, p.ID(), p.s.raw)
}

// stop ends the permit's context with cause (the first cause stays), and
// reports whether the server may hold it past this end: an update of it
// went unanswered. The context ends under p.mu, so that an update that
// looks under p.mu either sees it ended or arms before it ends.
func (p *Permit) stop(cause error) (unknown bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.cancel(cause)
	return p.unknown
}

// end ends the permit's context with cause and forgets it in the Client:
// the server holds it no longer, or the caller gives it back.
func (p *Permit) end(cause error) {
	p.stop(cause)
	p.s.c.permits.forget(p)
}

// expire ends the permit at its local deadline. One whose server state is
// unknown is given back rather than forgotten: nothing else would.
func (p *Permit) expire() {
	if p.stop(p.expired()) {
		p.giveBack()
		return
	}
	p.s.c.permits.forget(p)
}

// giveBack releases an ended permit that the server may still hold. It
// stays with the Client (or is taken back there) until a release is
// answered, so that Close tries again.
func (p *Permit) giveBack() {
	ctx, cancel := context.WithTimeout(context.Background(), p.s.c.cfg.opTimeout)
	defer cancel()
	if _, err := p.s.release(ctx, p.id); err == nil {
		p.s.c.permits.forget(p)
		return
	}
	p.s.c.permits.keep(p)
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

// add records the permits the server granted, all at once, or gives
// them back at once when the Client closed meanwhile: Close never sees
// part of them.
func (ps *permitSet) add(s *PermitSemaphore, ids [][]byte, sent time.Time, leaseTime time.Duration) ([]*Permit, error) {
	ps.mu.Lock()
	if ps.closed {
		ps.mu.Unlock()
		s.giveBackIDs(ids)
		return nil, fmt.Errorf("%w: %q: %w", lease.ErrNotAcquired, s.name, lease.ErrClosed)
	}
	if ps.live == nil {
		ps.live = map[permitKey]*Permit{}
	}
	out := make([]*Permit, len(ids))
	for i, id := range ids {
		ctx, cancel := context.WithCancelCause(context.Background())
		p := &Permit{s: s, id: id, ctx: ctx, cancel: cancel}
		ps.live[p.key()] = p
		p.mu.Lock()
		p.arm(sent, leaseTime)
		p.mu.Unlock()
		out[i] = p
	}
	ps.mu.Unlock()
	return out, nil
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

// keep tracks p again, an ended permit not yet given back, unless the
// Client has closed.
func (ps *permitSet) keep(p *Permit) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return
	}
	if ps.live == nil {
		ps.live = map[permitKey]*Permit{}
	}
	ps.live[p.key()] = p
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
