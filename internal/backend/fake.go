package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Fake is an in-memory Backend whose TTLs follow time.Now, so that under
// testing/synctest the timing logic above it runs on a fake clock,
// deterministically. Faults are injected per call.
//
// It answers as the Redis backend does, the scripts' rules written in Go:
// leases, reentrant locks, the fair queue, semaphores' permits (k at a
// time, the stored N, Resize), Available and Downgrade, so that package
// leasetest serves packages semaphore and rwlock too. The contract tests
// run against both. It publishes nothing: waiters above it poll, bounded
// by the holder's TTL and their backoff, as a waiter on Redis does when a
// release message is lost.
//
// A Fake is one client of the in-memory server; WithTimeout gives another
// client of the same server.
type Fake struct {
	*fakeServer
	// timeout ends a call the server does not answer (SetHang) even when
	// its context would end later or never, as a Redis client's read
	// timeout does; 0: only the context ends it.
	timeout time.Duration
}

// fakeServer is the state every client of one Fake shares.
type fakeServer struct {
	mu          sync.Mutex
	keys        map[string]fakeKey
	fences      map[string]int64
	queues      map[string]fakeQueue
	lastArrival int64 // the latest arrival in any queue (us): arrivals increase
	retired     map[retiredKey]retiredMark
	sweepAt     int // len(retired) at which mark purges expired markers
	fault       func(op string) error
	hang        bool
	calls       map[string]int
}

// fakeKey is a name's key, P{N}: a lease (a string), a reentrant lock (a
// hash of one owner's count) or a semaphore's permits (a sorted set).
type fakeKey struct {
	token  string    // a lease's token, or a reentrant lock's owner
	count  int64     // a reentrant lock's count; 0 for a lease
	expiry time.Time // zero: no expiry; a set's: its latest permit's
	set    *fakeSet  // a semaphore's permits; nil for a lease or a reentrant lock
}

func (k fakeKey) heldBy(it Item) bool {
	return k.set == nil && k.token == it.Token && (k.count > 0) == it.Reentrant
}

// ttl is the key's PTTL as a waiter is told it: -1 without expiry.
func (k fakeKey) ttl() time.Duration {
	if k.expiry.IsZero() {
		return -1
	}
	return time.Until(k.expiry)
}

// extend makes k live at least ttl from now: never shorter (S8).
func (k *fakeKey) extend(ttl time.Duration) {
	if exp := time.Now().Add(ttl); k.expiry.Before(exp) {
		k.expiry = exp
	}
}

// retiredKey is the fake's P{N}:retired:<id> (docs/design.md section 3).
type retiredKey struct{ name, id string }

type retiredMark struct {
	until time.Time
	// An entry mark's (acquire.lua, reenter.lua): the owner's count after
	// the entry, for resent copies, and the fence of the hold entered, for
	// Abandon. 0 for the marker of a release or an abandon.
	count, fence int64
}

// NewFake returns an empty Fake, whose calls to a hung server wait for
// their contexts alone.
func NewFake() *Fake {
	return &Fake{fakeServer: &fakeServer{keys: map[string]fakeKey{}, fences: map[string]int64{}, queues: map[string]fakeQueue{},
		retired: map[retiredKey]retiredMark{}, calls: map[string]int{}}}
}

// WithTimeout returns another client of f's server whose calls, while the
// server hangs, fail after d if their contexts have not ended by then, as
// a go-redis command the server does not answer fails after the client's
// read timeout. A call with a context that never ends
// (Release(context.Background())) then ends too, as it does on Redis,
// instead of blocking for ever, and with it a test under testing/synctest.
func (f *Fake) WithTimeout(d time.Duration) *Fake {
	return &Fake{fakeServer: f.fakeServer, timeout: d}
}

// ErrFakeTimeout is what a call to a hung server fails with once its
// client's timeout (WithTimeout) runs out. It wraps os.ErrDeadlineExceeded,
// as go-redis's "i/o timeout" does, and its outcome is unknown
// (MaybeApplied), as on Redis.
var ErrFakeTimeout = fmt.Errorf("fake backend: no answer (unreachable): %w", os.ErrDeadlineExceeded)

// SetFault makes every call of op ("acquire", "renew", "release",
// "abandon", "leave", "reenter", "available", "downgrade") that fault
// answers with a non-nil error fail with that error, unapplied. A nil
// fault clears it.
func (f *Fake) SetFault(fault func(op string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = fault
}

// SetHang makes every call block until its context ends, as a paused server
// or a black-holed connection does, and then fail with the context's error;
// or, on a client with a timeout (WithTimeout), until that runs out first,
// and then fail with ErrFakeTimeout. Clearing it does not answer the calls
// already hung: their requests were lost.
func (f *Fake) SetHang(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hang = on
}

// Calls returns how many times op was called (round trips).
func (f *Fake) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// Set stores token for name with ttl (0: no expiry), as a raw client
// overwriting a lease would.
func (f *Fake) Set(name, token string, ttl time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := fakeKey{token: token}
	if ttl > 0 {
		k.expiry = time.Now().Add(ttl)
	}
	f.keys[name] = k
}

// Delete removes name, as a raw client or an eviction would.
func (f *Fake) Delete(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.keys, name)
}

// Holder returns the token holding name and its remaining TTL; for a
// semaphore's permits, no token and the latest permit's TTL.
func (f *Fake) Holder(name string) (token string, ttl time.Duration, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k, ok := f.get(name)
	if !ok {
		return "", 0, false
	}
	if !k.expiry.IsZero() {
		ttl = time.Until(k.expiry)
	}
	return k.token, ttl, true
}

// Flush forgets every key, fences and markers included, as a restart without
// persistence does.
func (f *Fake) Flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = map[string]fakeKey{}
	f.fences = map[string]int64{}
	f.queues = map[string]fakeQueue{}
	f.retired = map[retiredKey]retiredMark{}
}

func (f *Fake) get(name string) (fakeKey, bool) {
	k, ok := f.keys[name]
	if ok && !k.expiry.IsZero() && !time.Now().Before(k.expiry) {
		delete(f.keys, name)
		return fakeKey{}, false
	}
	return k, ok
}

// begin counts the call and applies the injected faults; the lock is held
// on a nil return.
func (f *Fake) begin(ctx context.Context, op string) error {
	f.mu.Lock()
	f.calls[op]++
	if f.hang {
		f.mu.Unlock()
		return f.noAnswer(ctx)
	}
	if f.fault != nil {
		if err := f.fault(op); err != nil {
			f.mu.Unlock()
			return err
		}
	}
	return nil
}

// noAnswer waits, as a client does for an answer that never comes, for
// ctx to end or the client's timeout to run out. Its timer runs on
// testing/synctest's fake clock inside a bubble.
func (f *Fake) noAnswer(ctx context.Context) error {
	// A deadline no later than the timeout wins alone: were both to fire
	// at one instant (a clean-up bounded by the op timeout, on a client
	// whose timeout is the op timeout), which error came out would be
	// chance, even on a fake clock.
	if d, ok := ctx.Deadline(); f.timeout <= 0 || ok && time.Until(d) <= f.timeout {
		<-ctx.Done()
		return ctx.Err()
	}
	t := time.NewTimer(f.timeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return ErrFakeTimeout
	}
}

// mark remembers the request id on name for d.
func (f *Fake) mark(name, id string, d time.Duration, count int64) {
	if len(f.retired) >= f.sweepAt {
		// Markers expire as Redis keys do, or a long test's map would only
		// grow.
		for k, m := range f.retired {
			if !time.Now().Before(m.until) {
				delete(f.retired, k)
			}
		}
		f.sweepAt = 2*len(f.retired) + 1024
	}
	f.retired[retiredKey{name, id}] = retiredMark{until: time.Now().Add(d), count: count}
}

// markEntry leaves the entry mark of a reentrant request id on name, which
// left its owner's count at count, for d.
func (f *Fake) markEntry(name, id string, count int64, d time.Duration) {
	f.mark(name, id, d, count)
	m := f.retired[retiredKey{name, id}]
	m.fence = f.fences[name]
	f.retired[retiredKey{name, id}] = m
}

// entered returns the count a reentrant request id left, when its entry
// mark says it entered the hold of the name's current fence and owner
// holds that hold still.
func (f *Fake) entered(name, id, owner string, m retiredMark) (int64, bool) {
	k, held := f.get(name)
	if m.count == 0 || m.fence != f.fences[name] || !held || k.set != nil || k.count == 0 || k.token != owner {
		return 0, false
	}
	return m.count, true
}

// marked returns the live marker of id on name.
func (f *Fake) marked(name, id string) (retiredMark, bool) {
	k := retiredKey{name, id}
	m, ok := f.retired[k]
	if ok && !time.Now().Before(m.until) {
		delete(f.retired, k)
		return retiredMark{}, false
	}
	return m, ok
}

// Acquire implements Backend, as acquire.lua does (permit.lua for a
// permit: fake_permit.go).
func (f *Fake) Acquire(ctx context.Context, req Request) (Acquisition, error) {
	if req.Limit > 0 && req.Owner != "" {
		return Acquisition{}, errors.New("backend: a permit request has no owner")
	}
	if err := f.begin(ctx, "acquire"); err != nil {
		return Acquisition{}, err
	}
	defer f.mu.Unlock()
	if req.Limit > 0 {
		return f.permit(req, time.Now()), nil
	}
	return f.acquire(req, time.Now()), nil
}

// acquire is acquire.lua: a lease or a reentrant lock, barging or fair.
func (f *Fake) acquire(req Request, now time.Time) Acquisition {
	name := req.Name
	if m, ok := f.marked(name, req.Token); ok {
		if n, ok := f.entered(name, req.Token, req.Owner, m); ok && req.Owner != "" {
			return Acquisition{Acquired: true, Fence: m.fence, Count: n} // a resent copy
		}
		return Acquisition{Retired: true, HolderTTL: -1}
	}
	k, held := f.get(name)
	if req.Owner != "" && held && k.set == nil && k.count > 0 && k.token == req.Owner {
		// The owner enters once more, queue or not: waiting behind its
		// own lock would deadlock it.
		k.count++
		k.extend(req.TTL)
		f.keys[name] = k
		f.forgetWaiter(name, req.Token)
		f.markEntry(name, req.Token, k.count, retiredFree(req.TTL))
		return Acquisition{Acquired: true, Fence: f.fences[name], Count: k.count}
	}
	head := ""
	if req.Queue > 0 || f.queued(name) {
		f.forgetGone(name, now)
		head = f.head(name)
	}
	switch {
	case !held && (head == "" || head == req.Token):
		f.forgetWaiter(name, req.Token)
		return f.take(req, now)
	case held && req.Owner == "" && k.heldBy(req.Item()):
		// A resent request whose lease this is: the first answer.
		return Acquisition{Acquired: true, Fence: f.fences[name], Count: 1}
	}
	var a Acquisition
	if held {
		a.HolderTTL = k.ttl()
		a.HeldByPermits = k.set != nil
	}
	if req.Queue > 0 {
		a.Arrival = f.join(name, req.Token, 1, req.Queue, now)
		if head == "" {
			head = req.Token
		}
	}
	if !held && head != req.Token {
		// Free, but promised to the head of the queue until it comes or
		// is forgotten.
		a.HolderTTL = f.headWait(name, head, now)
	}
	return a
}

// take gives the free name to req (a lease or a reentrant lock) with the
// next fence.
func (f *Fake) take(req Request, now time.Time) Acquisition {
	fence := f.nextFence(req.Name)
	k := fakeKey{token: req.Token, expiry: now.Add(req.TTL)}
	if req.Owner != "" {
		k.token, k.count = req.Owner, 1
		defer f.markEntry(req.Name, req.Token, 1, retiredFree(req.TTL))
	}
	f.keys[req.Name] = k
	return Acquisition{Acquired: true, Fence: fence, Count: 1}
}

// nextFence hands out the name's next fence: above every earlier one
// (S5), seeded from the clock when the name has none, as after a Flush.
func (f *Fake) nextFence(name string) int64 {
	if _, ok := f.fences[name]; !ok {
		f.fences[name] = time.Now().UnixMicro()
	}
	f.fences[name]++
	return f.fences[name]
}

// Renew implements Backend, as renew.lua does.
func (f *Fake) Renew(ctx context.Context, items []Item, errs []error) {
	if err := f.begin(ctx, "renew"); err != nil {
		fill(errs, err)
		return
	}
	defer f.mu.Unlock()
	now := time.Now()
	for i, it := range items {
		if it.Permit {
			errs[i] = f.renewPermit(it, now)
			continue
		}
		k, ok := f.get(it.Name)
		if !ok {
			errs[i] = ErrGone // as renew.lua's -1: the name is free
			continue
		}
		if !k.heldBy(it) {
			errs[i] = ErrNotHeld
			continue
		}
		k.extend(it.TTL)
		f.keys[it.Name] = k
		errs[i] = nil
	}
}

// Abandon implements Backend, as abandon.lua does: the request is retired,
// leaves the queue, and what it took, if anything, is let go.
func (f *Fake) Abandon(ctx context.Context, req Request) error {
	if err := f.begin(ctx, "abandon"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	name := req.Name
	m, marked := f.marked(name, req.Token)
	_, entered := f.entered(name, req.Token, req.Owner, m)
	f.mark(name, req.Token, req.TTL, 0)
	f.forgetWaiter(name, req.Token)
	k, ok := f.get(name)
	switch {
	case !ok:
	case req.Limit > 0:
		if _, has := k.permit(req.Token); has {
			delete(k.set.permits, req.Token)
			f.settle(name, k, time.Now())
		}
	case req.Owner == "" && k.heldBy(req.Item()):
		delete(f.keys, name)
	case req.Owner != "" && marked && entered:
		// The one entry the request made (its entry mark says so), in
		// the hold it entered.
		if k.count--; k.count == 0 {
			delete(f.keys, name)
		} else {
			f.keys[name] = k
		}
	}
	return nil
}

// Leave implements Backend, as leave.lua does: the waiter's place in the
// queue goes (all k of a permit request's). A barging request is in no
// queue: nothing to leave.
func (f *Fake) Leave(ctx context.Context, req Request) error {
	if err := f.begin(ctx, "leave"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	f.forgetWaiter(req.Name, req.Token)
	return nil
}

// Reenter implements Backend, as reenter.lua does: a copy resent after a
// lost reply gets the first answer.
func (f *Fake) Reenter(ctx context.Context, it Item) (int64, error) {
	if err := f.begin(ctx, "reenter"); err != nil {
		return 0, err
	}
	defer f.mu.Unlock()
	op := it.op()
	if m, ok := f.marked(it.Name, op); ok {
		if m.count == 0 {
			return 0, ErrNotHeld // taken back before it arrived
		}
		return m.count, nil
	}
	k, ok := f.get(it.Name)
	if !ok || k.set != nil || k.count == 0 || k.token != it.Token {
		return 0, ErrNotHeld
	}
	k.count++
	k.extend(it.TTL)
	f.keys[it.Name] = k
	f.markEntry(it.Name, op, k.count, retiredFor)
	return k.count, nil
}

// Release implements Backend, as release.lua does: a release is remembered,
// so a copy resent after a lost reply is answered as the first was.
func (f *Fake) Release(ctx context.Context, items []Item, errs []error) {
	if err := f.begin(ctx, "release"); err != nil {
		fill(errs, err)
		return
	}
	defer f.mu.Unlock()
	for i, it := range items {
		if it.Permit {
			errs[i] = f.releasePermit(it, time.Now())
			continue
		}
		errs[i] = f.release(it)
	}
}

func (f *Fake) release(it Item) error {
	op := it.op()
	if m, ok := f.marked(it.Name, op); ok && m.count == 0 {
		return nil // a release's, not an acquire's entry mark
	}
	k, ok := f.get(it.Name)
	if !ok || !k.heldBy(it) {
		return ErrNotHeld
	}
	if it.Reentrant && it.Fence != 0 {
		if cur, ok := f.fences[it.Name]; ok && cur != it.Fence {
			return ErrNotHeld // an older hold of the owner's (release.lua)
		}
	}
	if it.Reentrant && it.Count > 0 && k.count > int64(it.Count) {
		k.count -= int64(it.Count)
		f.keys[it.Name] = k
		f.mark(it.Name, op, retiredFor, 0)
		return nil
	}
	delete(f.keys, it.Name)
	if d := it.memory(); d > 0 {
		f.mark(it.Name, op, d, 0)
	}
	return nil
}
