package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/rwlock"
	"github.com/tenure-go/tenure/semaphore"
)

// Scenario 7's implementations (semaphore.go runs them): tenure's permits,
// read and write locks and several names at once, adapted to a locker, and
// what each is measured against: the baseline permit, the raw commands of a
// permit-expirable semaphore as Redisson's RPermitExpirableSemaphore sends
// them (scripts and waiting written here), and scenario 1's raw lease.

// The baseline's two scripts, the bench's own. Like Redisson's, the permits
// are a sorted set of permit id -> expiry in the client's clock (ms); unlike
// Redisson's, n is sent with each request instead of kept in a counter key
// (which costs Redisson a GET and a DECRBY per acquire and an INCRBY per
// release), and the release does not read the permit's expiry first.
const (
	// baselinePermitAcquire drops the expired permits, counts the rest and
	// adds one if fewer than n are held. KEYS the set; ARGV token, now (ms),
	// TTL (ms), n. Returns -1 when granted, else the earliest permit's expiry
	// (ms), after which the caller tries again if no release wakes it first.
	baselinePermitAcquire = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[4]) then
  redis.call('ZADD', KEYS[1], tonumber(ARGV[2]) + tonumber(ARGV[3]), ARGV[1])
  return -1
end
return tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2])`

	// baselinePermitRelease removes the permit and tells the waiters one is
	// free. KEYS the set, the channel; ARGV token.
	baselinePermitRelease = `
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('PUBLISH', KEYS[2], '1')
  return 1
end
return 0`
)

// The k-permit baseline's scripts: the same, for k permits at once (k
// members token#1 .. token#k, as Redisson's acquire(n) adds n ids).
const (
	// baselinePermitAcquireK: KEYS the set; ARGV token, now (ms), TTL (ms),
	// n, k. Returns -1 when granted, else the earliest permit's expiry.
	baselinePermitAcquireK = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
local k = tonumber(ARGV[5])
if redis.call('ZCARD', KEYS[1]) + k <= tonumber(ARGV[4]) then
  local exp = tonumber(ARGV[2]) + tonumber(ARGV[3])
  for i = 1, k do
    redis.call('ZADD', KEYS[1], exp, ARGV[1] .. '#' .. i)
  end
  return -1
end
return tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2])`

	// baselinePermitReleaseK: KEYS the set, the channel; ARGV token, k.
	baselinePermitReleaseK = `
local n = 0
for i = 1, tonumber(ARGV[2]) do
  n = n + redis.call('ZREM', KEYS[1], ARGV[1] .. '#' .. i)
end
if n > 0 then
  redis.call('PUBLISH', KEYS[2], '1')
end
return n`
)

var (
	permitAcquireScript  = redis.NewScript(baselinePermitAcquire)
	permitReleaseScript  = redis.NewScript(baselinePermitRelease)
	permitAcquireKScript = redis.NewScript(baselinePermitAcquireK)
	permitReleaseKScript = redis.NewScript(baselinePermitReleaseK)
)

// permitBaseline is the Redisson-style semaphore with nothing around it:
// one script to take a permit, one to give it back and publish, and waiters
// woken by the message (or by the earliest permit's expiry), each client
// counting messages in a latch per name as Redisson's does. It subscribes to
// the channels of every name it will use when built, and waits for the
// server's confirmations, so no release can go unheard; Redisson subscribes
// when a waiter first waits. There is no renewal and no fence.
type permitBaseline struct {
	c       *redis.Client
	n, k    int // k > 1: k permits at once (the K scripts)
	ttl     time.Duration
	seq     atomic.Uint64
	ps      *redis.PubSub
	latches map[string]chan struct{} // by key; fixed once built
	done    chan struct{}
}

func baselinePermitKey(name string) string { return "baseline-permits:" + name }

func newPermitBaseline(c *redis.Client, n int, ttl time.Duration, names []string) (*permitBaseline, error) {
	b := &permitBaseline{c: c, n: n, ttl: ttl, latches: map[string]chan struct{}{}, done: make(chan struct{})}
	chans := make([]string, 0, len(names))
	for _, name := range names {
		k := baselinePermitKey(name)
		b.latches[k] = make(chan struct{}, 1024)
		chans = append(chans, k+":released")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b.ps = c.Subscribe(ctx, chans...)
	for range chans {
		if _, err := b.ps.Receive(ctx); err != nil {
			_ = b.ps.Close()
			return nil, fmt.Errorf("baseline permits: subscribe: %w", err)
		}
	}
	msgs := b.ps.Channel()
	go func() {
		defer close(b.done)
		for m := range msgs {
			if l, ok := b.latches[strings.TrimSuffix(m.Channel, ":released")]; ok {
				select {
				case l <- struct{}{}:
				default:
				}
			}
		}
	}()
	return b, nil
}

func (b *permitBaseline) acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	key := baselinePermitKey(name)
	latch, ok := b.latches[key]
	if !ok {
		return nil, fmt.Errorf("baseline permits: %q was not subscribed to", name)
	}
	token := nextToken(&b.seq)
	for {
		var next int64
		var err error
		if b.k > 1 {
			next, err = permitAcquireKScript.Run(ctx, b.c, []string{key}, token, time.Now().UnixMilli(), b.ttl.Milliseconds(), b.n, b.k).Int64()
		} else {
			next, err = permitAcquireScript.Run(ctx, b.c, []string{key}, token, time.Now().UnixMilli(), b.ttl.Milliseconds(), b.n).Int64()
		}
		if err != nil {
			return nil, err
		}
		if next < 0 {
			break
		}
		t := time.NewTimer(time.Until(time.UnixMilli(next)))
		select {
		case <-latch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
	return func(ctx context.Context) error {
		if b.k > 1 {
			n, err := permitReleaseKScript.Run(ctx, b.c, []string{key, key + ":released"}, token, b.k).Int()
			if err == nil && n != b.k {
				err = errors.New("baseline permits: not held")
			}
			return err
		}
		n, err := permitReleaseScript.Run(ctx, b.c, []string{key, key + ":released"}, token).Int()
		if err == nil && n != 1 {
			err = errors.New("baseline permits: not held")
		}
		return err
	}, nil
}

func (b *permitBaseline) close() error {
	err := b.ps.Close()
	<-b.done
	return err
}

// tenurePermits takes permits of n through package semaphore, k at once
// when k > 1.
type tenurePermits struct {
	m    *lease.Manager
	p    *semaphore.Permits
	n, k int
}

func (t tenurePermits) acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	acquire := t.p.Acquire
	if t.k > 1 {
		acquire = func(ctx context.Context, name string, n int, opts ...lease.AcquireOption) (*lease.Lease, error) {
			return t.p.AcquireN(ctx, name, n, t.k, opts...)
		}
	}
	l, err := acquire(ctx, name, t.n)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (t tenurePermits) close() error { return t.m.Close() }

// tenureRW takes read locks (write false) or write locks through package
// rwlock.
type tenureRW struct {
	m     *lease.Manager
	k     *rwlock.Locker
	write bool
}

func (t tenureRW) acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	lock := t.k.RLock
	if t.write {
		lock = t.k.Lock
	}
	l, err := lock(ctx, name)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (t tenureRW) close() error { return t.m.Close() }

func newManager(c *redis.Client) (*lease.Manager, error) {
	return lease.New(c, lease.WithTTL(semTTL), lease.WithLogger(quietLogger))
}

// A semImpl builds a locker on a client for the given names (which the
// baseline subscribes to up front).
type semImpl struct {
	Name, Note string
	new        func(c *redis.Client, names []string) (locker, error)
}

func tenurePermitImpl(n int) semImpl {
	return semImpl{Name: "tenure permit", Note: fmt.Sprintf("semaphore.Permits.Acquire(ctx, name, %d) + Lease.Release: permit.lua and release.lua, woken by the manager's pub/sub message", n),
		new: func(c *redis.Client, _ []string) (locker, error) {
			m, err := newManager(c)
			if err != nil {
				return nil, err
			}
			return tenurePermits{m: m, p: semaphore.New(m), n: n}, nil
		}}
}

func baselinePermitImpl(n int) semImpl {
	return semImpl{Name: "baseline permit", Note: fmt.Sprintf("the bench's Redisson-style scripts, n=%d: EVALSHA (ZREMRANGEBYSCORE, ZCARD, ZADD) + EVALSHA (ZREM, PUBLISH); waits for the message or the earliest expiry", n),
		new: func(c *redis.Client, names []string) (locker, error) {
			return newPermitBaseline(c, n, semTTL, names)
		}}
}

// tenurePermitsKImpl takes k of n permits at once (semaphore.AcquireN).
func tenurePermitsKImpl(n, k int) semImpl {
	return semImpl{Name: fmt.Sprintf("tenure %d permits", k), Note: fmt.Sprintf("semaphore.Permits.AcquireN(ctx, name, %d, %d) + Lease.Release: permit.lua and release.lua with k", n, k),
		new: func(c *redis.Client, _ []string) (locker, error) {
			m, err := newManager(c)
			if err != nil {
				return nil, err
			}
			return tenurePermits{m: m, p: semaphore.New(m), n: n, k: k}, nil
		}}
}

// baselinePermitsKImpl is the baseline's scripts for k of n at once.
func baselinePermitsKImpl(n, k int) semImpl {
	return semImpl{Name: fmt.Sprintf("baseline %d permits", k), Note: fmt.Sprintf("the baseline's scripts taking k=%d of n=%d at once: k ZADDs, k ZREMs", k, n),
		new: func(c *redis.Client, names []string) (locker, error) {
			b, err := newPermitBaseline(c, n, semTTL, names)
			if b != nil {
				b.k = k
			}
			return b, err
		}}
}

// setNames are the two names a several-name cycle holds for name.
func setNames(name string) []string { return []string{name + ":a", name + ":b"} }

// tenureSet holds two names at once through lease.Manager.AcquireAll.
type tenureSet struct{ m *lease.Manager }

func (t tenureSet) acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	s, err := t.m.AcquireAll(ctx, setNames(name))
	if err != nil {
		return nil, err
	}
	return s.Release, nil
}

func (t tenureSet) close() error { return t.m.Close() }

func tenureSetImpl() semImpl {
	return semImpl{Name: "tenure 2 names", Note: "lease.Manager.AcquireAll of 2 names + Set.Release: two acquire.lua in name order, two release.lua in parallel",
		new: func(c *redis.Client, _ []string) (locker, error) {
			m, err := newManager(c)
			if err != nil {
				return nil, err
			}
			return tenureSet{m: m}, nil
		}}
}

// baselineSet takes two names with scenario 1's raw pair, in name order.
type baselineSet struct{ b *baselineLocker }

func (t baselineSet) acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	var releases []func(context.Context) error
	for _, n := range setNames(name) {
		rel, err := t.b.acquire(ctx, n)
		if err != nil {
			for _, r := range releases {
				_ = r(context.Background())
			}
			return nil, err
		}
		releases = append(releases, rel)
	}
	return func(ctx context.Context) error {
		var errs []error
		for _, r := range releases {
			errs = append(errs, r(ctx))
		}
		return errors.Join(errs...)
	}, nil
}

func (t baselineSet) close() error { return nil }

func baselineSetImpl() semImpl {
	return semImpl{Name: "baseline 2 names", Note: "scenario 1's raw SET NX PX + compare-and-delete for each of 2 names, in name order",
		new: func(c *redis.Client, _ []string) (locker, error) {
			return baselineSet{b: &baselineLocker{c: c, ttl: semTTL}}, nil
		}}
}

func tenureRWImpl(write bool) semImpl {
	if write {
		return semImpl{Name: "tenure Lock", Note: "rwlock.Locker.Lock + Release: a fair lease (acquire.lua with the queue), release.lua",
			new: func(c *redis.Client, _ []string) (locker, error) {
				m, err := newManager(c)
				if err != nil {
					return nil, err
				}
				return tenureRW{m: m, k: rwlock.New(m), write: true}, nil
			}}
	}
	return semImpl{Name: "tenure RLock", Note: "rwlock.Locker.RLock + Release: a permit of an unlimited semaphore (permit.lua), release.lua",
		new: func(c *redis.Client, _ []string) (locker, error) {
			m, err := newManager(c)
			if err != nil {
				return nil, err
			}
			return tenureRW{m: m, k: rwlock.New(m)}, nil
		}}
}

// fromLease adapts scenario 1's implementations.
func fromLease(im impl, name, note string) semImpl {
	return semImpl{Name: name, Note: note, new: func(c *redis.Client, _ []string) (locker, error) { return im.new(c, semTTL) }}
}
