package redisson

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/lease"
)

var (
	//go:embed scripts/sem_release_ids.lua
	semReleaseIDsSrc string
	//go:embed scripts/sem_lease.lua
	semLeaseSrc string

	// Beside the other scripts of an RPermitExpirableSemaphore
	// (client.go), for the operations on several permits and the lease
	// time.
	semReleaseIDsScript = backend.NewScript(publishSrc + semReclaimSrc + semReleaseIDsSrc)
	semLeaseScript      = backend.NewScript(publishSrc + semReclaimSrc + semLeaseSrc)
)

// foreverMs is the expiry Redisson writes for a permit taken without a
// lease time (RedissonPermitExpirableSemaphore.nonExpirableTimeout).
const foreverMs int64 = 922337203685477

// permitIDLen is the length of a permit id in bytes, Redisson's
// ServiceManager.generateId; the id's text is their lowercase hex.
const permitIDLen = 16

// A PermitSemaphore is one Redisson RPermitExpirableSemaphore of a Client,
// as RedissonClient.getPermitExpirableSemaphore returns one: a handle
// that takes nothing by itself. It is safe for concurrent use.
//
// Its free permits are an integer at the name (as the NameMapper maps
// it: WithNamePrefix); each permit taken is its 16-byte id in the sorted
// set {NAME}:timeout, scored with its expiry in ms of the wall clock of
// the client that took it, or 922337203685477 when it was taken without a
// lease time. Releases, and expired permits reclaimed, publish the number
// of free permits on redisson_sc:{NAME}, which wakes as many waiters.
//
// The server never expires a permit: whoever next looks (an acquire,
// AvailablePermits, UpdateLeaseTime, Java's or Go's) gives back those
// whose expiry has passed in its own clock. So a permit's lease is only as
// good as the clocks of every client that shares the name: one whose
// clock runs ahead reclaims a permit early, one whose clock runs behind
// late, and nothing stops a holder that outlives its lease (Java's never
// knows). A Go Permit is not renewed, as Redisson's are not (see Permit).
type PermitSemaphore struct {
	c        *Client
	name     string // as given
	raw      string // mapped: the free permits' key
	timeouts string // {NAME}:timeout
	channel  string // redisson_sc:{NAME}
	err      error  // a bad name: every method returns it
}

// GetPermitExpirableSemaphore returns name's RPermitExpirableSemaphore.
func (c *Client) GetPermitExpirableSemaphore(name string) *PermitSemaphore {
	raw := c.cfg.namePrefix + name
	return &PermitSemaphore{
		c: c, name: name, raw: raw,
		timeouts: suffixName(raw, "timeout"),
		channel:  prefixName("redisson_sc", raw),
		err:      checkName(raw),
	}
}

// Name returns the name the semaphore was made with.
func (s *PermitSemaphore) Name() string { return s.name }

// Key returns the key of the free permits: the name as mapped.
func (s *PermitSemaphore) Key() string { return s.raw }

// TimeoutsKey returns the sorted set of the permits taken and their
// expiries, {NAME}:timeout.
func (s *PermitSemaphore) TimeoutsKey() string { return s.timeouts }

// Channel returns the channel releases are published on,
// redisson_sc:{NAME}.
func (s *PermitSemaphore) Channel() string { return s.channel }

// TrySetPermits sets the number of permits when the semaphore has none
// set yet, as Java's trySetPermits, and reports whether it did.
func (s *PermitSemaphore) TrySetPermits(ctx context.Context, permits int) (bool, error) {
	return s.set(ctx, permits, "try")
}

// SetPermits makes the free and the taken permits (expired or not) number
// permits, by adding free permits or taking them away, as Java's
// setPermits: a semaphore may be left with fewer than none free.
func (s *PermitSemaphore) SetPermits(ctx context.Context, permits int) error {
	_, err := s.set(ctx, permits, "set")
	return err
}

func (s *PermitSemaphore) set(ctx context.Context, permits int, how string) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	keys := []string{s.raw, s.channel, s.timeouts}
	n, err := semSetScript.Run(ctx, s.c.c, keys, permits, s.c.publish, how).Int64()
	return n == 1, err
}

// AddPermits adds free permits, or takes them away when n is negative,
// as Java's addPermits; the semaphore need not be set first.
func (s *PermitSemaphore) AddPermits(ctx context.Context, n int) error {
	if s.err != nil {
		return s.err
	}
	return semAddScript.Run(ctx, s.c.c, []string{s.raw, s.channel}, n, s.c.publish).Err()
}

// AvailablePermits returns the number of free permits, once every permit
// expired in this host's clock has been reclaimed (and waiters told), as
// Java's availablePermits.
func (s *PermitSemaphore) AvailablePermits(ctx context.Context) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	keys := []string{s.raw, s.timeouts, s.channel}
	n, err := semAvailableScript.Run(ctx, s.c.c, keys, time.Now().UnixMilli(), s.c.publish).Int64()
	return int(n), err
}

// AcquiredPermits returns how many permits are taken, by Go and Java
// holders alike, as Java's acquiredPermits(): permits expired in this
// host's clock are reclaimed first (and the waiters told), as Java's
// does; permits without a lease time count.
func (s *PermitSemaphore) AcquiredPermits(ctx context.Context) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	keys := []string{s.raw, s.timeouts, s.channel}
	n, err := semAcquiredScript.Run(ctx, s.c.c, keys, time.Now().UnixMilli(), s.c.publish).Int64()
	return int(n), err
}

// Acquire takes a permit, waiting while none is free: it is woken by the
// number a release (Java's or Go's) publishes, and looks again when the
// earliest permit taken expires (in its taker's clock, read from this
// one) or at its backoff step (WithBackOff) at the latest. ctx bounds the
// wait, not the permit; a wait that ends returns an error wrapping
// lease.ErrNotAcquired.
//
// leaseTime is the permit's life: it expires leaseTime after the request
// was sent, in this host's clock, and is never renewed. Zero gives it no
// lease time: it lives until released (or the Client closes), as Java's
// acquire() without one. A negative leaseTime is an error wrapping
// lease.ErrInvalidOption.
func (s *PermitSemaphore) Acquire(ctx context.Context, leaseTime time.Duration) (*Permit, error) {
	ps, err := s.acquire(ctx, 1, leaseTime, true)
	if err != nil {
		return nil, err
	}
	return ps[0], nil
}

// TryAcquire is Acquire without waiting: it returns an error wrapping
// lease.ErrNotAcquired at once when no permit is free.
func (s *PermitSemaphore) TryAcquire(ctx context.Context, leaseTime time.Duration) (*Permit, error) {
	ps, err := s.acquire(ctx, 1, leaseTime, false)
	if err != nil {
		return nil, err
	}
	return ps[0], nil
}

// AcquireN takes n permits at once, all or none, as Java's acquire(n,
// leaseTime): one script takes them when n are free, or none, so that two
// takers of several permits never each hold part of what they need. It
// waits as Acquire does, until n are free at once; Java's tryAcquire(n,
// waitTime, leaseTime) is AcquireN with a ctx deadline. Each of the
// Permits is an ordinary one, with its own id, Release, UpdateLeaseTime
// and Context; they share the lease time and its local deadline. n below
// 1 is an error wrapping lease.ErrInvalidOption.
func (s *PermitSemaphore) AcquireN(ctx context.Context, n int, leaseTime time.Duration) ([]*Permit, error) {
	return s.acquire(ctx, n, leaseTime, true)
}

// TryAcquireN is AcquireN without waiting, as Java's tryAcquire(n): it
// returns an error wrapping lease.ErrNotAcquired at once when fewer than
// n permits are free, having taken none.
func (s *PermitSemaphore) TryAcquireN(ctx context.Context, n int, leaseTime time.Duration) ([]*Permit, error) {
	return s.acquire(ctx, n, leaseTime, false)
}

// Release gives back the permit whose id (32 hex digits) Java's acquire
// or a Permit returned, as Java's release(permitId): anyone with the id
// may. An id not taken (released already, reclaimed, or never taken) is
// an error wrapping lease.ErrNotHeld; so is one that had expired in this
// host's clock, though its permit is then given back, as Java's does.
// A Permit of this Client with that id ends (lease.ErrReleased).
func (s *PermitSemaphore) Release(ctx context.Context, id string) error {
	if s.err != nil {
		return s.err
	}
	raw, err := s.permitID(id)
	if err != nil {
		return err
	}
	n, err := s.release(ctx, raw)
	if err == nil {
		// A Permit of this Client with that id has ended, whoever
		// called: its work must stop.
		s.c.permits.endID(s, raw, lease.ErrReleased)
	}
	switch {
	case err != nil:
		return err
	case n == 0:
		return fmt.Errorf("%w: %q: permit %s was released, reclaimed or never taken", lease.ErrNotHeld, s.name, id)
	case n < 0:
		return fmt.Errorf("%w: %q: permit %s had expired; it was given back", lease.ErrNotHeld, s.name, id)
	}
	return nil
}

// ReleaseIDs gives back the permits with the ids given, all or none, as
// Java's release(List<String>) and tryRelease(List<String>): when any id
// is not taken (released already, reclaimed, or never taken) or has
// expired in this host's clock, none is released, and the error wraps
// lease.ErrNotHeld and names the first such id (Java's tryRelease
// answers 0, its release throws). Unlike Release, an expired id is not
// given back here: Java's leaves it for the next look to reclaim. Every
// permit expired in this host's clock is reclaimed first, and the number
// released is published, which wakes as many waiters. Anyone with the ids
// may release them; the Permits of this Client with those ids end
// (lease.ErrReleased). No ids, or an id given twice, is an error wrapping
// lease.ErrInvalidOption, with nothing sent: Java's would release the
// permits and throw all the same.
func (s *PermitSemaphore) ReleaseIDs(ctx context.Context, ids ...string) error {
	if s.err != nil {
		return s.err
	}
	raws, err := s.decodeIDs(ids)
	if err != nil {
		return err
	}
	keys := []string{s.raw, s.channel, s.timeouts}
	args := make([]any, 0, 2+len(raws))
	args = append(args, time.Now().UnixMilli(), s.c.publish)
	for _, raw := range raws {
		args = append(args, raw)
	}
	n, err := semReleaseIDsScript.Run(ctx, s.c.c, keys, args...).Int64()
	switch {
	case err != nil:
		return err
	case n < 0 && int(-n) <= len(ids):
		return fmt.Errorf("%w: %q: permit %s was released, reclaimed, expired or never taken; none of the %d was released", lease.ErrNotHeld, s.name, ids[-n-1], len(ids))
	case n != int64(len(ids)):
		return fmt.Errorf("redisson: unexpected reply %d to a release of %d permits", n, len(ids))
	}
	for _, raw := range raws {
		s.c.permits.endID(s, raw, lease.ErrReleased)
	}
	return nil
}

// permitID returns the bytes of a permit id given as text (Java's lowercase
// hex; any case is read), or an error wrapping lease.ErrNotHeld: what is no
// id names no permit taken.
func (s *PermitSemaphore) permitID(id string) ([]byte, error) {
	raw, err := hex.DecodeString(id)
	if err != nil || len(raw) == 0 {
		return nil, fmt.Errorf("%w: %q: permit %q is no permit id", lease.ErrNotHeld, s.name, id)
	}
	return raw, nil
}

// decodeIDs returns the bytes of ReleaseIDs' ids, or why they are none to
// release.
func (s *PermitSemaphore) decodeIDs(ids []string) ([][]byte, error) {
	if len(ids) == 0 {
		return nil, invalid("no permit ids to release")
	}
	raws := make([][]byte, len(ids))
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		raw, err := s.permitID(id)
		if err != nil {
			return nil, fmt.Errorf("%w; none was released", err)
		}
		if seen[string(raw)] {
			return nil, invalid("permit %s given twice", id)
		}
		seen[string(raw)] = true
		raws[i] = raw
	}
	return raws, nil
}

// LeaseTime returns how long the permit with the id has left before it
// expires, as Java's getLeaseTime(permitId): its expiry, in the clock of
// the client that took it, less now in this host's clock, every permit
// expired in this host's clock reclaimed first (this one included). A
// permit without a lease time gives a negative duration (-1ns; Java's
// -1). An id not taken (released, reclaimed, or never taken) is an error
// wrapping lease.ErrNotHeld (Java throws IllegalArgumentException), and a
// Permit of this Client with that id ends (lease.ErrLost): the server
// holds it no more.
func (s *PermitSemaphore) LeaseTime(ctx context.Context, id string) (time.Duration, error) {
	if s.err != nil {
		return 0, s.err
	}
	raw, err := s.permitID(id)
	if err != nil {
		return 0, err
	}
	keys := []string{s.raw, s.timeouts, s.channel}
	left, err := semLeaseScript.Run(ctx, s.c.c, keys, raw, foreverMs, time.Now().UnixMilli(), s.c.publish).Int64()
	switch {
	case err != nil:
		return 0, err
	case left == 0:
		s.c.permits.endID(s, raw, fmt.Errorf("%w: redisson permit %s of %q: gone at a LeaseTime", lease.ErrLost, id, s.raw))
		return 0, fmt.Errorf("%w: %q: permit %s was released, reclaimed or never taken", lease.ErrNotHeld, s.name, id)
	case left < 0:
		return -1, nil
	}
	return time.Duration(left) * time.Millisecond, nil
}

// release runs sem_release.lua for the id's bytes: 1, -1 or 0.
func (s *PermitSemaphore) release(ctx context.Context, raw []byte) (int64, error) {
	keys := []string{s.raw, s.channel, s.timeouts}
	return semReleaseScript.Run(ctx, s.c.c, keys, raw, time.Now().UnixMilli(), s.c.publish).Int64()
}

// grant is what one acquire script answered.
type grant struct {
	ok      bool
	nearest int64 // the earliest expiry of a permit taken, ms; -1 if none
	sent    time.Time
}

// try sends one acquire of the permit ids with leaseTime (0: none), as
// Java's tryAcquireAsync(ids, timeoutDate) sends it: their number, then
// each id.
func (s *PermitSemaphore) try(ctx context.Context, ids [][]byte, leaseTime time.Duration) (grant, error) {
	g := grant{sent: time.Now()}
	expiry := foreverMs
	if leaseTime > 0 {
		expiry = g.sent.UnixMilli() + ms(leaseTime)
	}
	keys := []string{s.raw, s.timeouts, s.channel}
	args := make([]any, 0, 5+len(ids))
	args = append(args, len(ids), expiry, g.sent.UnixMilli(), foreverMs, s.c.publish)
	for _, id := range ids {
		args = append(args, id)
	}
	v, err := semAcquireScript.Run(ctx, s.c.c, keys, args...).Int64Slice()
	if err != nil {
		return g, err
	}
	if len(v) != 2 {
		return g, fmt.Errorf("redisson: unexpected reply %v", v)
	}
	g.ok, g.nearest = v[0] == 1, v[1]
	return g, nil
}

func (s *PermitSemaphore) acquire(ctx context.Context, n int, leaseTime time.Duration, wait bool) ([]*Permit, error) {
	if s.err != nil {
		return nil, s.err
	}
	if leaseTime < 0 {
		return nil, invalid("negative lease time %v", leaseTime)
	}
	if n < 1 {
		return nil, invalid("%d permits: at least 1 must be asked for", n)
	}
	var wake <-chan struct{}
	var bo backoff.BackOff
	got := false // for the deferred stop: a waiter that leaves without a permit passes its wake on
	for {
		if err := s.c.stillWanted(ctx, s.name); err != nil {
			return nil, err
		}
		ids := newPermitIDs(n)
		g, err := s.try(ctx, ids, leaseTime)
		if err == nil && g.ok {
			ps, perr := s.handOver(ids, g.sent, leaseTime)
			if !wait || !errors.Is(perr, errTooLate) {
				got = perr == nil
				return ps, perr
			}
			// Won, but too late to use, and given back: try again as
			// when no permit is free, after the backoff step.
			g.nearest = -1
		}
		if err != nil {
			s.cleanup(ids, err)
			if !wait || refused(err) {
				return nil, fmt.Errorf("%w: %q: %w", lease.ErrNotAcquired, s.name, err)
			}
		} else if !wait {
			return nil, fmt.Errorf("%w: %q: %s", lease.ErrNotAcquired, s.name, s.noneFree(n))
		}
		if bo == nil {
			bo = s.c.cfg.backoff()
			// Listen before looking again, so that a release between
			// that look and the wait is heard.
			w, stop, lerr := s.c.notifier.listenCounted(ctx, s.channel)
			if lerr != nil {
				return nil, fmt.Errorf("%w: %q: %w", lease.ErrNotAcquired, s.name, lease.ErrClosed)
			}
			defer func() { stop(!got) }()
			wake = w
			continue
		}
		pause := bo.NextBackOff()
		if pause == backoff.Stop {
			return nil, fmt.Errorf("%w: %q: the backoff policy gave up", lease.ErrNotAcquired, s.name)
		}
		if err == nil && g.nearest >= 0 {
			pause = min(pause, max(time.Until(time.UnixMilli(g.nearest)), time.Millisecond))
		}
		sleep(ctx, wake, pause)
	}
}

// noneFree says why a TryAcquire of n permits took none.
func (s *PermitSemaphore) noneFree(n int) string {
	if n == 1 {
		return "no permit is free"
	}
	return fmt.Sprintf("fewer than %d permits are free; none was taken", n)
}

// handOver records the permit ids the server granted and returns their
// Permits, unless they came too late to use (S1): the reply later than
// leaseTime − drift after the request was sent, or a permit ended or past
// its deadline by the time it was recorded (a stall in between). Its
// timer would end such a Permit only after the caller had it. Permits
// too late are released, every one of them (all or none), and the error
// wraps errTooLate; a release that fails leaves a permit to its expiry,
// which is near by then.
func (s *PermitSemaphore) handOver(ids [][]byte, sent time.Time, leaseTime time.Duration) ([]*Permit, error) {
	if leaseTime == 0 || time.Since(sent) < leaseTime-s.c.cfg.drift(leaseTime) {
		ps, err := s.c.permits.add(s, ids, sent, leaseTime)
		if err != nil || allInTime(ps) {
			return ps, err
		}
		for _, p := range ps {
			p.end(fmt.Errorf("%w: %q: %w", lease.ErrNotAcquired, s.name, errTooLate))
		}
	}
	s.giveBackIDs(ids)
	return nil, fmt.Errorf("%w: %q: %w", lease.ErrNotAcquired, s.name, errTooLate)
}

// allInTime reports whether every permit of ps may be handed over.
func allInTime(ps []*Permit) bool {
	for _, p := range ps {
		if !p.inTime() {
			return false
		}
	}
	return true
}

// cleanup follows an acquire whose outcome is unknown (a timeout: it may
// still run, docs/design.md S7): the permits it may have taken are given
// back, as Redisson releases the ids of an acquire that failed, so that
// no phantom holds them for their lease (or for ever, without one).
func (s *PermitSemaphore) cleanup(ids [][]byte, err error) {
	var re redis.Error
	if errors.As(err, &re) {
		return // the server answered: nothing was applied
	}
	s.giveBackIDs(ids)
}

// giveBackIDs releases each of ids that the server holds, one by one
// (sem_release.lua gives back an expired one too, which the all-or-none
// release of ReleaseIDs would refuse), each bounded by the op timeout. It
// stops at the first that fails, so that an outage costs one op timeout,
// not one per id: the rest are left to their expiry, as one is.
func (s *PermitSemaphore) giveBackIDs(ids [][]byte) {
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), s.c.cfg.opTimeout)
		_, err := s.release(ctx, id)
		cancel()
		if err != nil {
			return
		}
	}
}

// newPermitIDs returns n fresh permit ids' bytes.
func newPermitIDs(n int) [][]byte {
	ids := make([][]byte, n)
	for i := range ids {
		ids[i] = newPermitID()
	}
	return ids
}

// newPermitID returns a fresh permit id's bytes, as Redisson draws them.
func newPermitID() []byte {
	b := make([]byte, permitIDLen)
	_, _ = rand.Read(b)
	return b
}
