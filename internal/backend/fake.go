package backend

import (
	"context"
	"sync"
	"time"
)

// Fake is an in-memory Backend whose TTLs follow time.Now, so that under
// testing/synctest the timing logic above it runs on a fake clock,
// deterministically. Faults are injected per call.
type Fake struct {
	mu        sync.Mutex
	keys      map[string]fakeKey
	fences    map[string]int64
	abandoned map[string]time.Time // token -> until
	fault     func(op string) error
	hang      bool
	calls     map[string]int
}

type fakeKey struct {
	token  string    // a lease's token, or a reentrant lock's owner
	count  int64     // a reentrant lock's count; 0 for a lease
	expiry time.Time // zero: no expiry
}

func (k fakeKey) heldBy(it Item) bool {
	return k.token == it.Token && (k.count > 0) == it.Reentrant
}

// NewFake returns an empty Fake.
func NewFake() *Fake {
	return &Fake{keys: map[string]fakeKey{}, fences: map[string]int64{}, abandoned: map[string]time.Time{}, calls: map[string]int{}}
}

// SetFault makes every call of op ("acquire", "renew", "release") that
// fault answers with a non-nil error fail with that error, unapplied.
// A nil fault clears it.
func (f *Fake) SetFault(fault func(op string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = fault
}

// SetHang makes every call block until its context ends, as a paused server
// or a black-holed connection does, and then fail with the context's error.
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

// Holder returns the token holding name and its remaining TTL.
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

// Flush forgets every key, fences included, as a restart without
// persistence does.
func (f *Fake) Flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = map[string]fakeKey{}
	f.fences = map[string]int64{}
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
		<-ctx.Done()
		return ctx.Err()
	}
	if f.fault != nil {
		if err := f.fault(op); err != nil {
			f.mu.Unlock()
			return err
		}
	}
	return nil
}

// Acquire implements Backend. Fair requests are served as barging ones.
func (f *Fake) Acquire(ctx context.Context, req Request) (Acquisition, error) {
	if err := f.begin(ctx, "acquire"); err != nil {
		return Acquisition{}, err
	}
	defer f.mu.Unlock()
	name := req.Name
	if k, ok := f.get(name); ok {
		switch {
		case req.Owner == "" && k.count == 0 && k.token == req.Token:
			return Acquisition{Acquired: true, Fence: f.fences[name], Count: 1}, nil
		case req.Owner != "" && k.count > 0 && k.token == req.Owner:
			k.count++
			if exp := time.Now().Add(req.TTL); k.expiry.Before(exp) {
				k.expiry = exp
			}
			f.keys[name] = k
			return Acquisition{Acquired: true, Fence: f.fences[name], Count: k.count}, nil
		case k.expiry.IsZero():
			return Acquisition{HolderTTL: -1}, nil
		}
		return Acquisition{HolderTTL: time.Until(k.expiry)}, nil
	}
	if until, ok := f.abandoned[req.Token]; ok && time.Now().Before(until) {
		return Acquisition{HolderTTL: -1}, nil
	}
	if _, ok := f.fences[name]; !ok {
		f.fences[name] = time.Now().UnixMicro()
	}
	f.fences[name]++
	k := fakeKey{token: req.Token, expiry: time.Now().Add(req.TTL)}
	if req.Owner != "" {
		k.token, k.count = req.Owner, 1
	}
	f.keys[name] = k
	return Acquisition{Acquired: true, Fence: f.fences[name], Count: 1}, nil
}

// Renew implements Backend.
func (f *Fake) Renew(ctx context.Context, items []Item, errs []error) {
	if err := f.begin(ctx, "renew"); err != nil {
		fill(errs, err)
		return
	}
	defer f.mu.Unlock()
	for i, it := range items {
		k, ok := f.get(it.Name)
		if !ok || !k.heldBy(it) {
			errs[i] = ErrNotHeld
			continue
		}
		if exp := time.Now().Add(it.TTL); k.expiry.Before(exp) {
			k.expiry = exp
			f.keys[it.Name] = k
		}
		errs[i] = nil
	}
}

// Abandon implements Backend.
func (f *Fake) Abandon(ctx context.Context, req Request) error {
	if err := f.begin(ctx, "abandon"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	f.abandoned[req.Token] = time.Now().Add(req.TTL)
	k, ok := f.get(req.Name)
	if ok && ((req.Owner == "" && k.count == 0 && k.token == req.Token) ||
		(req.Owner != "" && req.Exclusive && k.count > 0 && k.token == req.Owner)) {
		delete(f.keys, req.Name)
	}
	return nil
}

// Leave implements Backend; the fake keeps no queue.
func (f *Fake) Leave(ctx context.Context, req Request) error {
	if err := f.begin(ctx, "leave"); err != nil {
		return err
	}
	f.mu.Unlock()
	return nil
}

// Reenter implements Backend.
func (f *Fake) Reenter(ctx context.Context, it Item) (int64, error) {
	if err := f.begin(ctx, "reenter"); err != nil {
		return 0, err
	}
	defer f.mu.Unlock()
	k, ok := f.get(it.Name)
	if !ok || !k.heldBy(it) {
		return 0, ErrNotHeld
	}
	k.count++
	if exp := time.Now().Add(it.TTL); k.expiry.Before(exp) {
		k.expiry = exp
	}
	f.keys[it.Name] = k
	return k.count, nil
}

// Release implements Backend.
func (f *Fake) Release(ctx context.Context, items []Item, errs []error) {
	if err := f.begin(ctx, "release"); err != nil {
		fill(errs, err)
		return
	}
	defer f.mu.Unlock()
	for i, it := range items {
		k, ok := f.get(it.Name)
		if !ok || !k.heldBy(it) {
			errs[i] = ErrNotHeld
			continue
		}
		if it.Reentrant && it.Count > 0 && k.count > int64(it.Count) {
			k.count -= int64(it.Count)
			f.keys[it.Name] = k
		} else {
			delete(f.keys, it.Name)
		}
		errs[i] = nil
	}
}
