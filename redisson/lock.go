package redisson

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/watchdog"
)

// A Lock is one Redisson lock of a Client, as RedissonClient.getLock,
// getFencedLock or getReadWriteLock(...).readLock()/writeLock() returns
// one: a handle that takes nothing by itself. It is safe for concurrent
// use.
type Lock struct {
	c    *Client
	name string // as given
	raw  string // mapped: the hash's key
	kind kind
	err  error // a bad name: every method returns it
}

// GetLock returns name's RLock.
func (c *Client) GetLock(name string) *Lock { return c.lock(name, plainLock) }

// GetFencedLock returns name's RFencedLock: an RLock whose every entry
// draws a token from redisson_lock_token:{NAME} (Hold.Token), the counter
// Java's RFencedLock draws from.
func (c *Client) GetFencedLock(name string) *Lock { return c.lock(name, fencedLock) }

// A ReadWriteLock is name's RReadWriteLock: one hash, shared by readers or
// held by one writer (who may also read).
type ReadWriteLock struct{ read, write *Lock }

// GetReadWriteLock returns name's RReadWriteLock.
func (c *Client) GetReadWriteLock(name string) *ReadWriteLock {
	return &ReadWriteLock{read: c.lock(name, readLock), write: c.lock(name, writeLock)}
}

// ReadLock returns the read half.
func (rw *ReadWriteLock) ReadLock() *Lock { return rw.read }

// WriteLock returns the write half.
func (rw *ReadWriteLock) WriteLock() *Lock { return rw.write }

func (c *Client) lock(name string, k kind) *Lock {
	raw := c.cfg.namePrefix + name
	return &Lock{c: c, name: name, raw: raw, kind: k, err: checkName(raw)}
}

// Name returns the name the Lock was made with.
func (l *Lock) Name() string { return l.name }

// Key returns the lock's hash key: the name as the NameMapper (the
// WithNamePrefix option) maps it.
func (l *Lock) Key() string { return l.raw }

// Channel returns the channel the lock's releases are published on:
// redisson_lock__channel:{NAME} for an RLock and an RFencedLock,
// redisson_rwlock:{NAME} for either half of an RReadWriteLock. An
// RFairLock's releases go to its first waiter alone, on this channel
// followed by ":" and the waiter's field.
func (l *Lock) Channel() string {
	if l.kind == readLock || l.kind == writeLock {
		return rwChannel(l.raw)
	}
	return lockChannel(l.raw)
}

// Lock takes the lock for the owner ctx carries (WithOwner; a fresh one if
// none), entering again if that owner holds it, and waiting while another
// holds it: it is woken by the release message a Java or Go holder
// publishes, and looks again at the holder's TTL or its backoff step at
// the latest. ctx bounds the wait, not the hold; a wait that ends returns
// an error wrapping lease.ErrNotAcquired.
func (l *Lock) Lock(ctx context.Context) (*Hold, error) { return l.take(ctx, true, 0) }

// TryLock is Lock without waiting: it returns an error wrapping
// lease.ErrNotAcquired at once when another owner holds the lock.
func (l *Lock) TryLock(ctx context.Context) (*Hold, error) { return l.take(ctx, false, 0) }

// LockFor is Lock with a fixed lease, as Redisson's lock(leaseTime): the
// hash lives lease from when the request was sent and is never renewed;
// the Hold's context ends at its local deadline, sent + lease − drift,
// unless it was unlocked before. An owner that holds the lock already
// cannot enter it again with a lease, nor enter a leased hold again
// (ErrLeaseReentry): the entry would set the hash's TTL anew, and could
// cut it short under the holder's feet (docs/design.md S8). A read or
// write lock's lease must not exceed WithJavaWatchdogTimeout.
func (l *Lock) LockFor(ctx context.Context, leaseTime time.Duration) (*Hold, error) {
	if err := l.checkLease(leaseTime); err != nil {
		return nil, err
	}
	return l.take(ctx, true, leaseTime)
}

// TryLockFor is TryLock with a fixed lease, as Redisson's tryLock(0,
// leaseTime): see LockFor. Redisson's tryLock(waitTime, leaseTime) is
// LockFor with a context that ends after waitTime.
func (l *Lock) TryLockFor(ctx context.Context, leaseTime time.Duration) (*Hold, error) {
	if err := l.checkLease(leaseTime); err != nil {
		return nil, err
	}
	return l.take(ctx, false, leaseTime)
}

// ErrUpgrade is why a write lock is refused, at once, to an owner that
// holds the read lock of the same RReadWriteLock in this Client: Redisson
// lets no reader become a writer, so it would wait for itself until its
// context ended. Unlock the read lock first. It is wrapped with
// lease.ErrNotAcquired; package rwlock's ErrUpgrade is the same refusal.
var ErrUpgrade = errors.New("a reader cannot upgrade to a writer: unlock the read lock first")

// holding reports whether key's owner holds its lock in this Client.
func (c *Client) holding(key holdKey) bool {
	return c.holdingAnd(key, func(*hold) bool { return true })
}

// holdingAnd reports whether key's owner holds its lock in this Client
// and also(h) of its hold, under the hold's lock.
func (c *Client) holdingAnd(key holdKey, also func(*hold) bool) bool {
	c.mu.Lock()
	h := c.holds[key]
	c.mu.Unlock()
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count > 0 && h.ctx.Err() == nil && also(h)
}

// ErrLeaseReentry is why LockFor or TryLockFor is refused to an owner that
// holds the lock already, and Lock or TryLock to one that holds it with a
// fixed lease. It is wrapped with lease.ErrNotAcquired.
var ErrLeaseReentry = errors.New("a re-entry with a fixed lease, or into one, is not offered: it would set the hash's TTL anew and could cut it short")

// checkLease returns why lease is no lease time for l: too short to leave
// room for the drift, or, for a read-write lock, longer than the Java
// services' watchdog timeout, to which a Java reader's renewal sets the
// hash.
func (l *Lock) checkLease(lease time.Duration) error {
	cfg := &l.c.cfg
	switch {
	case lease < MinWatchdogTimeout:
		return invalid("lease time %v is below %v", lease, MinWatchdogTimeout)
	case cfg.drift(lease) >= lease:
		return invalid("lease time %v leaves nothing after the drift %v", lease, cfg.drift(lease))
	case (l.kind == readLock || l.kind == writeLock) && lease > cfg.javaTTL:
		return invalid("lease time %v exceeds the Java services' %v (WithJavaWatchdogTimeout): a Java reader's renewal would cut it short", lease, cfg.javaTTL)
	}
	return nil
}

// Do takes the lock (waiting as Lock does), runs fn with a context that
// ends when ctx or the hold ends, and unlocks when fn returns. It returns
// fn's error; if the lock was lost while fn ran, an error wrapping
// lease.ErrLost (and fn's error, if any).
func (l *Lock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	h, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	run, cancel := context.WithCancelCause(h.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	ferr := fn(run)
	stop()
	cancel(nil)
	lost := h.Err()
	uerr := h.Unlock(context.WithoutCancel(ctx))
	if lost != nil && !errors.Is(lost, lease.ErrReleased) {
		return errors.Join(fmt.Errorf("%w: %q: while fn ran", lease.ErrLost, l.name), ferr)
	}
	if ferr != nil {
		return ferr
	}
	if uerr != nil && errors.Is(uerr, lease.ErrNotHeld) {
		return fmt.Errorf("%w: %q: %w", lease.ErrLost, l.name, uerr)
	}
	return uerr
}

// ForceUnlock deletes the lock whoever holds it, and tells its waiters, as
// Redisson's forceUnlock: an RLock's hash goes whatever it holds; a read
// lock's only in mode read and a write lock's only in mode write. It
// reports whether anything was deleted. A Go holder hears the message
// too, finds its field gone, and its hold ends at once (lease.ErrLost,
// ErrForceUnlocked); a Java holder never learns.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	if l.err != nil {
		return false, l.err
	}
	if l.kind == fairLock {
		return l.forceFair(ctx)
	}
	keys := []string{l.raw, l.Channel()}
	args := []any{"0", l.c.publish}
	switch l.kind {
	case readLock:
		args = append(args, "read")
	case writeLock:
		args[0] = "1"
		args = append(args, "write")
	}
	n, err := forceScript.Run(ctx, l.c.c, keys, args...).Int64()
	return n == 1, err
}

// attempt is what one acquire script answered.
type attempt struct {
	ok    bool
	pttl  int64 // the holder's remaining TTL when not ok
	token int64 // a fenced lock's
	count int64 // the owner's entries after this one
	sent  time.Time
	lease time.Duration // a fixed lease; 0: the watchdog's TTL, renewed
}

// ttl is the TTL the attempt sets.
func (a attempt) ttl(c *Client) time.Duration {
	if a.lease > 0 {
		return a.lease
	}
	return c.cfg.ttl
}

func (l *Lock) try(ctx context.Context, field string, fw fairArgs, leaseTime time.Duration) (attempt, error) {
	a := attempt{sent: time.Now(), lease: leaseTime}
	ttl := ms(a.ttl(l.c))
	var v []int64
	var err error
	switch l.kind {
	case plainLock, fencedLock:
		keys := []string{l.raw}
		if l.kind == fencedLock {
			keys = append(keys, tokenKey(l.raw))
		}
		v, err = lockScript.Run(ctx, l.c.c, keys, ttl, field).Int64Slice()
	case readLock:
		v, err = readLockScript.Run(ctx, l.c.c, []string{l.raw, timeoutPrefix(l.raw, field)}, ttl, field, field+":write").Int64Slice()
	case writeLock:
		v, err = writeLockScript.Run(ctx, l.c.c, []string{l.raw}, ttl, field).Int64Slice()
	case fairLock:
		v, err = l.tryFair(ctx, field, fw, a.sent, ttl)
	}
	if err != nil {
		return a, err
	}
	if len(v) != 3 {
		return a, fmt.Errorf("redisson: unexpected reply %v", v)
	}
	a.ok, a.token, a.count = v[0] == -1 && v[2] > 0, v[1], v[2]
	if !a.ok {
		a.pttl = v[0]
	}
	return a, nil
}

func (l *Lock) take(ctx context.Context, wait bool, leaseTime time.Duration) (*Hold, error) {
	if l.err != nil {
		return nil, l.err
	}
	h, err := l.attempts(ctx, wait, leaseTime)
	if _, named := OwnerFrom(ctx); err != nil && !named && errors.Is(err, lease.ErrNotAcquired) {
		// A second Lock without an owner is a new owner, which waits
		// for the first: say so, rather than only that the wait ended.
		if f := l.c.holderHere(l.raw); f != "" {
			err = fmt.Errorf("%w; %w, under owner %s: lock under its Hold's Context (or WithOwner) to enter again", err, ErrHeldHere, f)
		}
	}
	return h, err
}

// ErrHeldHere is joined to a refusal (lease.ErrNotAcquired) of a Lock
// whose context named no owner, when the name is held by this same
// Client: under another owner, which a context without one never is.
var ErrHeldHere = errors.New("the name is held by this same Client")

// holderHere returns the field of an owner of this Client holding raw,
// or "".
func (c *Client) holderHere(raw string) string {
	c.mu.Lock()
	holds := make([]*hold, 0, 1)
	for k, h := range c.holds {
		if k.raw == raw {
			holds = append(holds, h)
		}
	}
	c.mu.Unlock()
	for _, h := range holds {
		h.mu.Lock()
		alive := h.count > 0 && h.ctx.Err() == nil
		h.mu.Unlock()
		if alive {
			return h.key.field
		}
	}
	return ""
}

// attempts is take's loop: it tries, and waits while another holds the
// lock.
func (l *Lock) attempts(ctx context.Context, wait bool, leaseTime time.Duration) (*Hold, error) {
	owner, key := l.ownerKey(ctx)
	if l.kind == writeLock && l.c.holding(holdKey{kind: readLock, raw: l.raw, field: owner.Field()}) {
		return nil, fmt.Errorf("%w: %q: %w", lease.ErrNotAcquired, l.name, ErrUpgrade)
	}
	fw := l.fairArgs(ctx, wait)
	var wake <-chan struct{}
	var bo backoff.BackOff
	got := false // for the deferred stop: a waiter that leaves without the lock passes its wake on
	if fw.queue {
		defer l.leaveUnless(&got, key, fw) // Java's acquireFailed: do not hold up those behind
	}
	for {
		if err := l.c.stillWanted(ctx, l.name); err != nil {
			return nil, err
		}
		h, a, err := l.tryHold(ctx, key, owner, fw, leaseTime)
		switch {
		case h != nil:
			got = true
			return h, nil
		case a.ok && wait && errors.Is(err, errTooLate):
			// Won, but too late to use, and given back: try again as
			// for a held lock, after the backoff step.
			err, a.pttl = nil, -1
		case a.ok:
			return nil, err
		}
		if err := l.stop(err, wait); err != nil {
			return nil, err
		}
		if bo == nil {
			bo = l.c.cfg.backoff()
			// Listen before looking again, so that a release between
			// that look and the wait is heard.
			w, stop, lerr := l.c.notifier.listen(ctx, l.waitChannel(key.field))
			if lerr != nil {
				return nil, fmt.Errorf("%w: %q: %w", lease.ErrNotAcquired, l.name, lease.ErrClosed)
			}
			defer func() { stop(!got) }()
			wake = w
			continue
		}
		pause := bo.NextBackOff()
		if pause == backoff.Stop {
			return nil, fmt.Errorf("%w: %q: the backoff policy gave up", lease.ErrNotAcquired, l.name)
		}
		if err == nil && a.pttl >= 0 {
			pause = min(pause, time.Duration(a.pttl)*time.Millisecond)
		}
		sleep(ctx, wake, pause)
	}
}

// tryHold makes one attempt for key's owner and hands over what it won:
// the Hold, or what the attempt answered (a.ok false: another holds the
// lock) or an error (a.ok true: won, but not handed over).
func (l *Lock) tryHold(ctx context.Context, key holdKey, owner Owner, fw fairArgs, leaseTime time.Duration) (*Hold, attempt, error) {
	// Acquisitions of one owner's field are serialized in the Client, so
	// that the count the server answers follows the order in which they
	// are recorded: held trusts a count of 1 to mean that the owner had
	// nothing there, whatever its local hold says.
	mu := l.c.stripe(key)
	mu.Lock()
	defer mu.Unlock()
	if l.c.leaseReentry(key, leaseTime) {
		return nil, attempt{ok: true}, fmt.Errorf("%w: %q: %w", lease.ErrNotAcquired, l.name, ErrLeaseReentry)
	}
	a, err := l.try(ctx, key.field, fw, leaseTime)
	switch {
	case err != nil:
		// Under the stripe: a concurrent entry of the same owner,
		// granted but not yet recorded, must not be taken back.
		l.c.cleanup(key, err)
		return nil, a, err
	case !a.ok:
		return nil, a, nil
	}
	h, err := l.c.handOver(ctx, l, key, owner, a)
	return h, a, err
}

// errTooLate is why an acquisition the server granted was not handed
// over: its reply came after the local deadline it would have had.
var errTooLate = errors.New("it was won, but answered too late to be used")

// handOver records the entry a granted and returns its Hold, unless it
// came too late to use (S1): the hold ended, or past its deadline, by the
// time the Hold was made. A new hold's deadline is sent + ttl − drift, so
// a reply later than that is never handed over; a re-entry counts on its
// hold's deadline, which the watchdog keeps, so a slow re-entry into a
// hold still in time is handed over. The watchdog would end a Hold too
// late only after the caller had it. An entry too late is taken back on
// the server, under the owner's stripe, and the error wraps errTooLate; a
// take-back that fails leaves the entry to its TTL, never renewed.
func (c *Client) handOver(ctx context.Context, l *Lock, key holdKey, owner Owner, a attempt) (*Hold, error) {
	h, err := c.held(ctx, l, key, owner, a)
	if err != nil || h.inTime() {
		return h, err
	}
	h.drop()
	uctx, cancel := context.WithTimeout(context.Background(), c.cfg.opTimeout)
	defer cancel()
	_, _ = c.unlockOnce(uctx, key, newUUID())
	return nil, fmt.Errorf("%w: %q: %w", lease.ErrNotAcquired, l.name, errTooLate)
}

// inTime reports whether h may be handed over: its hold has not ended and
// its deadline has not passed.
func (h *Hold) inTime() bool {
	return h.h.ctx.Err() == nil && time.Now().Before(h.Deadline())
}

// drop takes back, locally, the entry of a Hold that is not handed over;
// the server's entry is the caller's to take back.
func (h *Hold) drop() {
	h.mu.Lock()
	h.unlocked = true
	h.mu.Unlock()
	h.cancel(errTooLate)
	hd, c := h.h, h.l.c
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if hd.count == 0 {
		return
	}
	hd.count--
	if hd.count == 0 {
		_ = c.wd.Remove(hd.entry)
		c.forget(hd)
		hd.cancel(fmt.Errorf("%w: redisson %s %q: %w", lease.ErrNotAcquired, hd.key.kind, hd.key.raw, errTooLate))
	}
}

// ownerKey returns the owner ctx carries (a fresh one if none; the
// Client's id if it names none) and its hold's key in this lock.
func (l *Lock) ownerKey(ctx context.Context) (Owner, holdKey) {
	owner, ok := OwnerFrom(ctx)
	switch {
	case !ok:
		owner = Owner{ClientID: l.c.id, ThreadID: newThreadID()}
	case owner.ClientID == "":
		owner.ClientID = l.c.id
	}
	field := owner.Field()
	if l.kind == writeLock {
		field += ":write"
	}
	return owner, holdKey{kind: l.kind, raw: l.raw, field: field}
}

// stop returns why a failed attempt (err, nil if the lock was held) ends
// the take: it does when the take does not wait, or the server refused.
func (l *Lock) stop(err error, wait bool) error {
	switch {
	case err != nil && (!wait || refused(err)):
		return fmt.Errorf("%w: %q: %w", lease.ErrNotAcquired, l.name, err)
	case err == nil && !wait:
		return fmt.Errorf("%w: %q is held by another owner", lease.ErrNotAcquired, l.name)
	}
	return nil
}

// stillWanted returns why a wait for name must end before its next
// attempt: the Client closed, or ctx ended. Locks and semaphores share it.
func (c *Client) stillWanted(ctx context.Context, name string) error {
	if c.isClosed() {
		return fmt.Errorf("%w: %q: %w", lease.ErrNotAcquired, name, lease.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %q: %w", lease.ErrNotAcquired, name, ctxErr(ctx))
	}
	return nil
}

// sleep waits for a wake, pause or the end of ctx, whichever comes first.
func sleep(ctx context.Context, wake <-chan struct{}, pause time.Duration) {
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-wake:
	case <-t.C:
	case <-ctx.Done():
	}
}

// cleanup follows an acquire whose outcome is unknown (a timeout: it may
// still run, docs/design.md S7): an owner that held nothing here takes
// back the entry it may have been given, so that no phantom holds the
// name for a whole TTL. An owner that holds the lock leaves it be: taking
// an entry back could take one of its own.
func (c *Client) cleanup(key holdKey, err error) {
	var re redis.Error
	if errors.As(err, &re) {
		return // the server answered: nothing was applied
	}
	c.mu.Lock()
	h := c.holds[key]
	c.mu.Unlock()
	if h != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.opTimeout)
	defer cancel()
	_, _ = c.unlockOnce(ctx, key, newUUID())
}

// refused reports whether err is the server's refusal, which waiting
// does not change (the name's key of another type, a user without the
// right), rather than a passing state (loading, a Cluster or a script
// busy, a failover under way) or a transport error.
func refused(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	for _, passing := range []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY"} {
		if redis.HasErrorPrefix(err, passing) {
			return false
		}
	}
	return true
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// hold is one owner's field in one hash, shared by every Hold (entry) of
// that owner in this Client; the watchdog renews it while count > 0.
type hold struct {
	c      *Client
	key    holdKey
	owner  Owner
	entry  *watchdog.Entry[item]
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu    sync.Mutex // orders entries and exits
	count int        // entries not yet unlocked

	renewed chan struct{} // poked after each successful renewal
	leased  bool          // a fixed lease (LockFor): never renewed nor re-entered
}

// leaseReentry reports whether an entry with lease (0: none) of key's
// owner must be refused (ErrLeaseReentry): the owner holds the lock
// already, and the entry or the hold has a fixed lease. Under key's stripe.
func (c *Client) leaseReentry(key holdKey, leaseTime time.Duration) bool {
	return c.holdingAnd(key, func(h *hold) bool { return leaseTime > 0 || h.leased })
}

// Lost implements watchdog.Holder.
func (h *hold) Lost(reason error) {
	h.c.forget(h)
	h.cancel(fmt.Errorf("%w: redisson %s %q: %w", lease.ErrLost, h.key.kind, h.key.raw, reason))
}

// Renewed implements watchdog.Holder.
func (h *hold) Renewed(err error) {
	if err != nil {
		return
	}
	select {
	case h.renewed <- struct{}{}:
	default:
	}
}

func (c *Client) forget(h *hold) {
	c.mu.Lock()
	if c.holds[h.key] == h {
		delete(c.holds, h.key)
	}
	c.mu.Unlock()
}

// held records an entry the server granted. Lock order: a hold's mu
// before the Client's, never the other way.
func (c *Client) held(ctx context.Context, l *Lock, key holdKey, owner Owner, a attempt) (*Hold, error) {
	c.mu.Lock()
	closed, h := c.closed, c.holds[key]
	c.mu.Unlock()
	if closed {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.opTimeout)
		defer cancel()
		_, _ = c.unlockOnce(ctx, key, newUUID())
		return nil, fmt.Errorf("%w: %q: %w", lease.ErrNotAcquired, l.name, lease.ErrClosed)
	}
	if h != nil {
		h.mu.Lock()
		alive := h.count > 0 && h.ctx.Err() == nil
		if alive && a.count > 1 {
			// An entry into a hold that is alive: the server counted it
			// with the others, and set the TTL again.
			h.count++
			h.mu.Unlock()
			_ = c.wd.Extended(h.entry, a.sent, c.cfg.ttl, c.cfg.ttl/3) // never a leased one (leaseReentry)
			return newHold(l, h, a.token), nil
		}
		if alive && a.count == 1 {
			// The server found no entry of the owner: the hold was lost
			// before its watchdog noticed. Its entries must not take
			// back the new one's.
			h.count = 0
			_ = c.wd.Remove(h.entry)
			h.cancel(fmt.Errorf("%w: redisson %s %q: the owner's field was gone at a new entry", lease.ErrLost, key.kind, key.raw))
		}
		h.mu.Unlock()
	}
	hctx, cancel := context.WithCancelCause(WithOwner(context.WithoutCancel(ctx), owner))
	h = &hold{c: c, key: key, owner: owner, ctx: hctx, cancel: cancel, count: 1, renewed: make(chan struct{}, 1), leased: a.lease > 0}
	h.mu.Lock()
	defer h.mu.Unlock()
	c.mu.Lock()
	c.holds[key] = h
	c.mu.Unlock()
	e, err := c.wd.Add(key.item(), a.ttl(c), a.sent, a.ttl(c)/3, a.lease == 0, h)
	if err != nil {
		c.forget(h)
		cancel(lease.ErrClosed)
		return nil, fmt.Errorf("%w: %q: %w", lease.ErrNotAcquired, l.name, lease.ErrClosed)
	}
	h.entry = e
	c.mu.Lock()
	if !c.closed {
		c.guards.Add(1)
		go c.guard(h)
	}
	c.mu.Unlock()
	return newHold(l, h, a.token), nil
}

// A Hold is one entry into a Redisson lock: Unlock it once. A nil *Hold
// (a failed Lock's) holds nothing and its methods do not panic.
type Hold struct {
	l      *Lock
	h      *hold
	token  int64
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	unlocked bool
}

func newHold(l *Lock, h *hold, token int64) *Hold {
	ctx, cancel := context.WithCancelCause(h.ctx)
	return &Hold{l: l, h: h, token: token, ctx: ctx, cancel: cancel}
}

var errNilHold = fmt.Errorf("%w: nil hold (its Lock failed)", lease.ErrNotHeld)

var nilCtx = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errNilHold)
	return ctx
}()

// Name returns the lock's name.
func (h *Hold) Name() string {
	if h == nil {
		return ""
	}
	return h.l.name
}

// Owner returns the owner that holds.
func (h *Hold) Owner() Owner {
	if h == nil {
		return Owner{}
	}
	return h.h.owner
}

// Field returns the owner's field in the lock's hash (a writer's ends in
// ":write").
func (h *Hold) Field() string {
	if h == nil {
		return ""
	}
	return h.h.key.field
}

// Token returns an RFencedLock entry's token: what this entry's INCR of
// redisson_lock_token:{NAME} returned, the counter Java's RFencedLock
// draws from, so a resource that checks tokens orders Go and Java fenced
// holders alike. It is 0 for the other kinds, which draw none.
func (h *Hold) Token() int64 {
	if h == nil || h.token < 0 {
		return 0
	}
	return h.token
}

// Context returns a context that carries the owner (locking the same name
// under it enters again) and is cancelled when this Hold is unlocked
// (cause lease.ErrReleased), the lock is lost (lease.ErrLost: a renewal
// found the owner's field gone, a message on the lock's channel made the
// holder look and its field was gone (ErrForceUnlocked), or the local
// deadline came with no renewal confirmed) or the Client closes
// (lease.ErrClosed). It is cancelled no
// later than the local deadline: sent + ttl − drift.
func (h *Hold) Context() context.Context {
	if h == nil {
		return nilCtx
	}
	return h.ctx
}

// Done is Context().Done().
func (h *Hold) Done() <-chan struct{} { return h.Context().Done() }

// Err returns nil while the Hold holds, then why not: lease.ErrReleased,
// or an error wrapping lease.ErrLost or lease.ErrClosed.
func (h *Hold) Err() error {
	if h == nil {
		return errNilHold
	}
	if err := context.Cause(h.h.ctx); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unlocked {
		return lease.ErrReleased
	}
	return nil
}

// Deadline returns the hold's local deadline.
func (h *Hold) Deadline() time.Time {
	if h == nil || h.h.entry == nil {
		return time.Time{}
	}
	return h.h.entry.Deadline()
}

// Renewals returns a channel that receives after renewals that moved the
// deadline (several may fold into one receive), for a supervisor that
// stops work by Deadline and must look again when it moves. Every Hold of
// one owner's hold shares it: read it from one goroutine. A nil Hold's is
// nil.
func (h *Hold) Renewals() <-chan struct{} {
	if h == nil {
		return nil
	}
	return h.h.renewed
}

// Exec applies the writes fn queues in one MULTI/EXEC, only while the
// owner's field is in the lock's hash (WATCH, then HEXISTS): it returns an
// error wrapping lease.ErrLost, having written nothing, when the lock is no
// longer held. On a Cluster the writes must be to keys in the lock's slot
// (a name with a {hash tag}).
func (h *Hold) Exec(ctx context.Context, fn func(pipe redis.Pipeliner) error) ([]redis.Cmder, error) {
	if h == nil {
		return nil, errNilHold
	}
	if fn == nil {
		return nil, invalid("nil function")
	}
	if err := h.Err(); err != nil {
		return nil, fmt.Errorf("%w: %q: %w", lease.ErrLost, h.l.name, err)
	}
	if !time.Now().Before(h.Deadline()) {
		return nil, fmt.Errorf("%w: %q: its local deadline has passed", lease.ErrLost, h.l.name)
	}
	key := h.h.key
	errGone := fmt.Errorf("%w: %q: the owner's field is gone; nothing was written", lease.ErrLost, h.l.name)
	var cmds []redis.Cmder
	var err error
	for range 3 { // a renewal between WATCH and EXEC aborts the transaction
		err = h.l.c.c.Watch(ctx, func(tx *redis.Tx) error {
			ok, err := tx.HExists(ctx, key.raw, key.field).Result()
			if err != nil {
				return err
			}
			if !ok {
				return errGone
			}
			cmds, err = tx.TxPipelined(ctx, fn)
			return err
		}, key.raw)
		if !errors.Is(err, redis.TxFailedErr) {
			break
		}
	}
	return cmds, err
}

// Unlock takes this entry back, as Redisson's unlock: the owner's count
// goes down by one; its last entry leaves the hash, and the last field the
// hash, waking the waiters with Redisson's message. A second Unlock of one
// Hold, or one after the lock was lost, changes nothing and returns an
// error wrapping lease.ErrNotHeld. An unlock whose reply was lost is sent
// once more with the same request id: Redisson's unlock latch answers the
// copy instead of applying it twice.
func (h *Hold) Unlock(ctx context.Context) error {
	if h == nil {
		return errNilHold
	}
	h.mu.Lock()
	if h.unlocked {
		h.mu.Unlock()
		return fmt.Errorf("%w: %q: unlocked already", lease.ErrNotHeld, h.l.name)
	}
	h.unlocked = true
	h.mu.Unlock()
	defer h.cancel(lease.ErrReleased)

	hd, c := h.h, h.l.c
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if hd.count == 0 || hd.ctx.Err() != nil {
		return fmt.Errorf("%w: %q: %w", lease.ErrNotHeld, h.l.name, context.Cause(hd.ctx))
	}
	hd.count--
	last := hd.count == 0
	if last {
		// No renewal after this: one sent now could run after the unlock
		// and keep a hash alive that nobody holds.
		_ = c.wd.Remove(hd.entry)
		c.forget(hd)
	}
	request := newUUID()
	sent := time.Now()
	res, err := c.unlockOnce(ctx, hd.key, request)
	var re redis.Error
	if resendBy := sent.Add(c.cfg.latch / 2); err != nil && !errors.As(err, &re) && time.Now().Before(resendBy) {
		// The first copy may have run: the copy is sent only while its
		// latch, which lives c.cfg.latch from when the first ran (no
		// earlier than sent), surely still answers for it, with a
		// margin for the copy's own way there. The latch is left to
		// expire rather than deleted: a DEL would cost every unlock a
		// round trip (Redisson's own DEL names the wrong key).
		retry, cancel := context.WithDeadline(context.WithoutCancel(ctx), resendBy)
		res, err = c.unlockOnce(retry, hd.key, request)
		cancel()
	}
	if last {
		hd.cancel(lease.ErrReleased)
	}
	switch {
	case err != nil:
		return fmt.Errorf("redisson: unlock %q: %w", h.l.name, err)
	case res == nil || (!last && res == int64(1)):
		if !last {
			hd.count = 0
			_ = c.wd.Remove(hd.entry)
			c.forget(hd)
			hd.cancel(fmt.Errorf("%w: redisson %s %q: an unlock found the owner's field gone", lease.ErrLost, hd.key.kind, hd.key.raw))
		}
		return fmt.Errorf("%w: %q: the owner's field is gone", lease.ErrNotHeld, h.l.name)
	}
	return nil
}

// unlockOnce runs the unlock script of key's kind with the latch of
// request. It returns the script's answer (nil: not held).
func (c *Client) unlockOnce(ctx context.Context, key holdKey, request string) (any, error) {
	latch := latchKey(key.raw, request)
	var cmd *redis.Cmd
	switch key.kind {
	case plainLock, fencedLock:
		cmd = unlockScript.Run(ctx, c.c, []string{key.raw, lockChannel(key.raw), latch},
			ms(c.cfg.ttl), key.field, c.publish, ms(c.cfg.latch))
	case readLock:
		cmd = readUnlockScript.Run(ctx, c.c,
			[]string{key.raw, rwChannel(key.raw), timeoutPrefix(key.raw, key.field), timeoutsOf(key.raw, key.field), latch},
			key.field, c.publish, ms(c.cfg.latch))
	case writeLock:
		cmd = writeUnlockScript.Run(ctx, c.c, []string{key.raw, rwChannel(key.raw), latch},
			ms(c.cfg.ttl), key.field, c.publish, ms(c.cfg.latch))
	case fairLock:
		cmd = fairUnlockScript.Run(ctx, c.c,
			[]string{key.raw, queueKey(key.raw), timeoutKey(key.raw), lockChannel(key.raw), latch},
			ms(c.cfg.ttl), key.field, c.publish, ms(c.cfg.latch), time.Now().UnixMilli())
	}
	v, err := cmd.Result()
	if errors.Is(err, redis.Nil) || (err == nil && v == int64(-1)) {
		return nil, nil // not held (-1: a fair lock's hash was gone)
	}
	return v, err
}

// ms is d in whole milliseconds, rounded up: the server never keeps a key
// for less than it was asked.
func ms(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, err) {
		return fmt.Errorf("%w (%w)", cause, err)
	}
	return err
}
