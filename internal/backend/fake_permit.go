package backend

import (
	"context"
	"time"
)

// The fake's semaphores, as permit.lua, renew.lua's, release.lua's and
// abandon.lua's 'z' branches, letgo.lua's settle(), available.lua and
// downgrade.lua keep them on Redis. A hold of k permits is k members of
// the Redis set with one score, which always move together: here it is one
// permit of weight k, and every count of the set counts weights.

// fakeSet is a semaphore's permits at the name's key.
type fakeSet struct {
	permits map[string]fakePermit // by token
	limit   int                   // the N stored with them (P{N}:permits' field n)
}

// fakePermit is one token's hold of k permits.
type fakePermit struct {
	k      int
	expiry time.Time // its score: held while ahead of the clock
	fence  int64
}

// permit returns token's hold in k's set, if k is a set and token holds
// one there, live or not.
func (k fakeKey) permit(token string) (fakePermit, bool) {
	if k.set == nil {
		return fakePermit{}, false
	}
	p, ok := k.set.permits[token]
	return p, ok
}

// held is how many permits of s are live at now (ZCOUNT (now +inf).
func (s *fakeSet) held(now time.Time) int {
	n := 0
	for _, p := range s.permits {
		if p.expiry.After(now) {
			n += p.k
		}
	}
	return n
}

// dropDead removes the permits past their expiry, as permit.lua does
// before counting.
func (s *fakeSet) dropDead(now time.Time) {
	for tok, p := range s.permits {
		if !p.expiry.After(now) {
			delete(s.permits, tok)
		}
	}
}

// earliest is when the first live permit of s expires.
func (s *fakeSet) earliest() time.Time {
	var first time.Time
	for _, p := range s.permits {
		if first.IsZero() || p.expiry.Before(first) {
			first = p.expiry
		}
	}
	return first
}

// settle makes the set at name live as long as its latest permit, or
// deletes it (and its stored N) when none is left or all have expired,
// as letgo.lua's settle() does.
func (f *Fake) settle(name string, k fakeKey, now time.Time) {
	var last time.Time
	for _, p := range k.set.permits {
		if p.expiry.After(last) {
			last = p.expiry
		}
	}
	if !last.After(now) {
		delete(f.keys, name)
		return
	}
	k.expiry = last
	f.keys[name] = k
}

// permit is permit.lua: k permits of a semaphore of req.Limit, all or
// none, barging or fair.
func (f *Fake) permit(req Request, now time.Time) Acquisition {
	name, want := req.Name, max(req.Permits, 1)
	if _, ok := f.marked(name, req.Token); ok {
		return Acquisition{Retired: true, HolderTTL: -1}
	}
	k, exists := f.get(name)
	held := 0
	switch {
	case exists && k.set != nil:
		if p, ok := k.set.permits[req.Token]; ok && p.expiry.After(now) {
			return Acquisition{Acquired: true, Fence: p.fence, Count: 1} // a resend
		}
		k.set.dropDead(now)
		if len(k.set.permits) == 0 {
			// An empty sorted set is no key.
			delete(f.keys, name)
			k = fakeKey{}
			break
		}
		held = k.set.held(now)
		if held > 0 && k.set.limit != 0 && k.set.limit != req.Limit {
			if !req.Resize {
				return Acquisition{HeldLimit: k.set.limit, HolderTTL: -1}
			}
			k.set.limit = req.Limit
		}
	case exists:
		held = -1 // a lease or a reentrant lock holds the name
	}
	ahead := 0
	if req.Queue > 0 || f.queued(name) {
		f.forgetGone(name, now)
		ahead = f.size(name)
		if r, ok := f.rank(name, req.Token); ok && req.Queue > 0 {
			ahead = r
		}
	}
	if held >= 0 && held+ahead+want <= req.Limit && (req.Queue > 0 || ahead == 0) {
		return f.grant(req, k, want, now)
	}
	a := Acquisition{HolderTTL: f.permitWait(name, k, held, want, req.Limit, now), Free: -1}
	if held >= 0 {
		a.Free = max(0, req.Limit-held)
	}
	if req.Queue > 0 {
		a.Arrival = f.join(name, req.Token, want, req.Queue, now)
	}
	return a
}

// grant gives req its want permits in k's set (made when the name is
// free) with the next fence; the set lives at least as long as the new
// permit, and stores req's N.
func (f *Fake) grant(req Request, k fakeKey, want int, now time.Time) Acquisition {
	fence := f.nextFence(req.Name)
	if k.set == nil {
		k = fakeKey{set: &fakeSet{permits: map[string]fakePermit{}}}
	}
	k.set.permits[req.Token] = fakePermit{k: want, expiry: now.Add(req.TTL), fence: fence}
	k.set.limit = req.Limit
	k.extend(req.TTL)
	f.keys[req.Name] = k
	f.forgetWaiter(req.Name, req.Token)
	return Acquisition{Acquired: true, Fence: fence, Count: 1}
}

// permitWait is how long a refused permit request waits before a permit
// could be free even if nobody lets go: the holder's TTL when another
// kind holds the name, the earliest permit's expiry when too few are
// free, else (free, but promised to the queue) the queue head's.
func (f *Fake) permitWait(name string, k fakeKey, held, want, limit int, now time.Time) time.Duration {
	switch {
	case held < 0:
		return k.ttl()
	case held+want > limit:
		return max(0, k.set.earliest().Sub(now))
	}
	return f.headWait(name, f.head(name), now)
}

// renewPermit is renew.lua's 'z' branch: a permit past its expiry, or
// none, is gone; another kind of holder is "not held".
func (f *Fake) renewPermit(it Item, now time.Time) error {
	k, ok := f.get(it.Name)
	switch {
	case !ok:
		return ErrGone
	case k.set == nil:
		return ErrNotHeld
	}
	p, ok := k.set.permits[it.Token]
	switch {
	case !ok:
		return ErrGone
	case !p.expiry.After(now):
		delete(k.set.permits, it.Token)
		f.settle(it.Name, k, now)
		return ErrGone
	}
	if until := now.Add(it.TTL); until.After(p.expiry) { // never shorter (S8)
		p.expiry = until
		k.set.permits[it.Token] = p
	}
	k.extend(it.TTL)
	f.keys[it.Name] = k
	return nil
}

// releasePermit is release.lua's 'z' branch: a permit past its expiry is
// dropped but reported not held; a release is remembered.
func (f *Fake) releasePermit(it Item, now time.Time) error {
	op := it.op()
	k, ok := f.get(it.Name)
	p, has := k.permit(it.Token)
	if !ok || !has {
		if _, done := f.marked(it.Name, op); done {
			return nil
		}
		return ErrNotHeld
	}
	delete(k.set.permits, it.Token)
	f.settle(it.Name, k, now)
	if !p.expiry.After(now) {
		return ErrNotHeld
	}
	if d := it.memory(); d > 0 {
		f.mark(it.Name, op, d, 0)
	}
	return nil
}

// Available is available.lua: how many of n permits of the semaphore name
// are free, and the n they are counted of (the stored one while permits
// are held). It writes nothing.
func (f *Fake) Available(ctx context.Context, name string, n int) (free, limit int, err error) {
	if err := f.begin(ctx, "available"); err != nil {
		return 0, 0, err
	}
	defer f.mu.Unlock()
	k, ok := f.get(name)
	switch {
	case !ok:
		return n, n, nil
	case k.set == nil:
		return 0, n, nil
	}
	held := k.set.held(time.Now())
	if held > 0 && k.set.limit != 0 {
		n = k.set.limit
	}
	return max(0, n-held), n, nil
}

// Downgrade is downgrade.lua: the lease w (a writer's) becomes the one
// permit req asks for, with a new fence, in one step. ErrNotHeld when w
// does not hold the name, or req was abandoned: nothing is touched.
func (f *Fake) Downgrade(ctx context.Context, w Item, req Request) (int64, error) {
	if err := f.begin(ctx, "downgrade"); err != nil {
		return 0, err
	}
	defer f.mu.Unlock()
	name := req.Name
	if _, ok := f.marked(name, req.Token); ok {
		return 0, ErrNotHeld
	}
	k, ok := f.get(name)
	if p, has := k.permit(req.Token); ok && has {
		return p.fence, nil // a resend: the first answer
	}
	if !ok || !k.heldBy(w) || w.Reentrant {
		return 0, ErrNotHeld
	}
	fence := f.nextFence(name)
	now := time.Now()
	set := &fakeSet{permits: map[string]fakePermit{req.Token: {k: 1, expiry: now.Add(req.TTL), fence: fence}}, limit: req.Limit}
	f.keys[name] = fakeKey{expiry: now.Add(req.TTL), set: set}
	return fence, nil
}
