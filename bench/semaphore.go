package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/rwlock"
	"github.com/tenure-go/tenure/semaphore"
)

// Scenario 7: counting semaphores (package semaphore) and read-write locks
// (package rwlock) against the raw commands a permit-expirable semaphore
// needs, as Redisson's RPermitExpirableSemaphore sends them, written here.

const (
	// semN is the number of permits of every semaphore of the scenario.
	semN = 3
	// semNames is how many names the permits and read locks of the cycle
	// spread over: at 32 goroutines two share each name, so at most two of
	// its three permits are held and an acquisition never waits.
	semNames = 16
	// semTTL is the TTL of every permit and lock, as in scenario 1: no
	// renewal falls inside a measurement.
	semTTL = 10 * time.Second
)

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
	token := fmt.Sprintf("%016x%016x", b.seq.Add(1), time.Now().UnixNano())
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

// A semVariant is one row of the cycle table: an implementation, the name
// each goroutine cycles on, and the baseline its time is divided by.
type semVariant struct {
	semImpl
	Base   string
	shared bool // goroutine g uses name g%semNames, else a name of its own
}

func semVariants() []semVariant {
	return []semVariant{
		{semImpl: tenurePermitImpl(semN), Base: "baseline permit", shared: true},
		{semImpl: baselinePermitImpl(semN), Base: "baseline permit", shared: true},
		{semImpl: tenureRWImpl(false), Base: "baseline permit", shared: true},
		{semImpl: tenureRWImpl(true), Base: "baseline lease"},
		{semImpl: fromLease(tenureImpl(), "tenure lease", "lease.Manager.Acquire + Release (scenario 1's tenure)"), Base: "baseline lease"},
		{semImpl: fromLease(baselineImpl(), "baseline lease", "SET NX PX + EVALSHA compare-and-delete (scenario 1's baseline)"), Base: "baseline lease"},
		{semImpl: tenurePermitsKImpl(semN, 2), Base: "baseline 2 permits"},
		{semImpl: baselinePermitsKImpl(semN, 2), Base: "baseline 2 permits"},
		{semImpl: tenureSetImpl(), Base: "baseline 2 names"},
		{semImpl: baselineSetImpl(), Base: "baseline 2 names"},
	}
}

func (v semVariant) name(g int) string {
	tag := strings.ReplaceAll(v.Name, " ", "-")
	if v.shared {
		return fmt.Sprintf("sem-%s-%d", tag, g%semNames)
	}
	return fmt.Sprintf("sem-%s-%d", tag, g)
}

type semCycleResult struct {
	Impl       string
	Base       string // the baseline the report divides its time by
	Goroutines int
	Run        int
	Ops        int64
	Seconds    float64
	OpsPerSec  float64
	NsPerOp    float64 // wall time per cycle per goroutine
	TripsPerOp float64
	AllocsOp   float64 // heap allocations of the whole process per cycle
	RedisUsOp  float64 // INFO commandstats usec of the commands the client sent, per cycle
	CPUUsOp    float64 // server CPU per cycle (INFO cpu)
	Lat        latencySummary
	Errors     int64
}

type semHandoffResult struct {
	Impl       string
	Goroutines int
	Run        int
	Seconds    float64
	Handoffs   int64
	PerSec     float64
	// Handoff is, for each release of a full semaphore, the time from the
	// holder sending its release to a waiter's acquire returning; Release
	// is the release call's own round trip, the unit the Trips fields count
	// in.
	Handoff     latencySummary
	Release     latencySummary
	P50Trips    float64
	P99Trips    float64
	CmdsPerHand float64 // commands both clients sent per handoff, the waiters' tries included
	MaxLive     int64   // the most permits held at once: must be at most semN
	Errors      int64
}

type rwMixResult struct {
	Run        int
	Goroutines int
	Writers    int
	Seconds    float64
	Reads      int64
	Writes     int64
	MaxReaders int64
	Overlaps   int64 // a writer with anyone else: must be 0
}

// semaphoreResults is scenario 7.
type semaphoreResults struct {
	N       int
	Names   int
	Cycle   []semCycleResult
	Handoff []semHandoffResult
	RWMix   []rwMixResult
	Notes   map[string]string
}

// semaphoreFailures are the scenario's safety failures.
func semaphoreFailures(s *semaphoreResults) []string {
	var out []string
	for _, h := range s.Handoff {
		if h.MaxLive > int64(s.N) {
			out = append(out, fmt.Sprintf("scenario 7: %s held %d permits of a semaphore of %d at once (%d goroutines)", h.Impl, h.MaxLive, s.N, h.Goroutines))
		}
	}
	for _, m := range s.RWMix {
		if m.Overlaps > 0 {
			out = append(out, fmt.Sprintf("scenario 7: a writer overlapped another holder %d times (%d goroutines, %d writers)", m.Overlaps, m.Goroutines, m.Writers))
		}
	}
	return out
}

func runSemaphore(ctx context.Context, cfg runConfig, addr string) (*semaphoreResults, error) {
	res := &semaphoreResults{N: semN, Names: semNames, Notes: map[string]string{}}
	vs := semVariants()
	for _, v := range vs {
		res.Notes[v.Name] = v.Note
	}
	type built struct {
		semVariant
		l     locker
		h     *counter
		names *nameHook
		c     *redis.Client
	}
	var bs []built
	defer func() {
		for _, b := range bs {
			_ = b.l.close()
			_ = b.c.Close()
		}
	}()
	for _, v := range vs {
		c, h := newClient(addr, 36)
		names := &nameHook{}
		c.AddHook(names)
		var all []string
		for g := range 32 {
			all = append(all, v.name(g))
		}
		l, err := v.new(c, all)
		if err != nil {
			c.Close()
			return res, fmt.Errorf("%s: %w", v.Name, err)
		}
		bs = append(bs, built{v, l, h, names, c})
	}
	admin, _ := newClient(addr, 1)
	defer admin.Close()
	for run := range cfg.runs {
		for _, par := range []int{1, 32} {
			for k := range bs {
				b := bs[(k+run)%len(bs)]
				if r := semCycleLoop(ctx, b.l, b.name, par, 0, 64); r.Errors > 0 {
					return res, fmt.Errorf("%s warm-up: %d errors", b.Name, r.Errors)
				}
				b.h.reset()
				b.names.reset()
				if err := admin.ConfigResetStat(ctx).Err(); err != nil {
					return res, err
				}
				rc := redisCPU(ctx, admin)
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				r := semCycleLoop(ctx, b.l, b.name, par, cfg.semCycleDur, 0)
				runtime.ReadMemStats(&m1)
				ops := float64(max(r.Ops, 1))
				r.CPUUsOp = (redisCPU(ctx, admin) - rc) * 1e6 / ops
				stats, err := commandStats(ctx, admin)
				if err != nil {
					return res, err
				}
				for name, s := range stats {
					if name != "info" && name != "config|resetstat" && b.names.sent(name) > 0 {
						r.RedisUsOp += float64(s.usec) / ops
					}
				}
				r.AllocsOp = float64(m1.Mallocs-m0.Mallocs) / ops
				r.TripsPerOp = float64(b.h.trips.Load()) / ops
				r.Impl, r.Base, r.Goroutines, r.Run = b.Name, b.Base, par, run
				res.Cycle = append(res.Cycle, r)
				cfg.logf("  semaphore cycle run %d %-16s g=%-2d %8.0f ops/s  %.2f trips/op  %.0f allocs/op  redis %.1fµs/op (cpu %.1fµs)  p50 %v",
					run, b.Name, par, r.OpsPerSec, r.TripsPerOp, r.AllocsOp, r.RedisUsOp, r.CPUUsOp, r.Lat.P50)
				if r.Errors > 0 {
					return res, fmt.Errorf("semaphore cycle %s: %d errors", b.Name, r.Errors)
				}
			}
		}
		handoffImpls := []semImpl{tenurePermitImpl(semN), baselinePermitImpl(semN)}
		for _, g := range cfg.semGoroutines {
			for k := range handoffImpls {
				im := handoffImpls[(k+run)%len(handoffImpls)]
				r, err := semHandoffOnce(ctx, im, addr, semN, g, cfg.semHandoffDur, fmt.Sprintf("sem-handoff-%d-%d-%s", run, g, strings.ReplaceAll(im.Name, " ", "-")))
				r.Run = run
				res.Handoff = append(res.Handoff, r)
				cfg.logf("  semaphore handoff run %d %-16s g=%-2d %6.0f handoffs/s  release → holder p50 %v p99 %v (%.1f / %.1f release round trips)  %.1f cmds/handoff  max live %d",
					run, im.Name, g, r.PerSec, r.Handoff.P50.Round(time.Microsecond), r.Handoff.P99.Round(time.Microsecond), r.P50Trips, r.P99Trips, r.CmdsPerHand, r.MaxLive)
				if err != nil {
					return res, fmt.Errorf("semaphore handoff %s g=%d: %w", im.Name, g, err)
				}
			}
		}
		m, err := rwMixOnce(ctx, addr, 8, 2, cfg.semMixDur, fmt.Sprintf("rw-mix-%d", run))
		m.Run = run
		res.RWMix = append(res.RWMix, m)
		cfg.logf("  rwlock mix run %d: %d reads, %d writes, at most %d readers at once, %d overlaps", run, m.Reads, m.Writes, m.MaxReaders, m.Overlaps)
		if err != nil {
			return res, fmt.Errorf("rwlock mix: %w", err)
		}
	}
	return res, nil
}

// semCycleLoop runs acquire+release from par goroutines, goroutine g on
// name(g), for d (or, if d is 0, count cycles in all).
func semCycleLoop(ctx context.Context, l locker, name func(int) string, par int, d time.Duration, count int64) semCycleResult {
	// Each goroutine's name, made before the clock starts: the loop's
	// allocations are the cycle's.
	names := make([]string, par)
	for g := range names {
		names[g] = name(g)
	}
	lats, errs, el := timedCycles(ctx, l, par, d, count, func(g int) string { return names[g] })
	n := int64(len(lats))
	r := semCycleResult{Ops: n, Seconds: el, OpsPerSec: float64(n) / el, Lat: summarize(lats), Errors: errs}
	r.NsPerOp = 1e9 * float64(par) / r.OpsPerSec
	return r
}

// semHandoffOnce keeps a semaphore of n permits full with g goroutines on
// one name, half on each of two clients: n hold, the others wait in
// acquire. A coordinator tells the longest holder to release, waits for a
// waiter's acquire to return, and only then lets the releaser try again, so
// every handoff is from a release to a waiter that was waiting, one at a
// time: the time between is exactly the release's handoff.
func semHandoffOnce(ctx context.Context, im semImpl, addr string, n, g int, d time.Duration, name string) (semHandoffResult, error) {
	r := semHandoffResult{Impl: im.Name, Goroutines: g}
	var lockers [2]locker
	var hooks [2]*counter
	for i := range lockers {
		c, h := newClient(addr, g/2+2)
		defer c.Close()
		l, err := im.new(c, []string{name})
		if err != nil {
			return r, err
		}
		defer l.close()
		lockers[i], hooks[i] = l, h
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	type event struct {
		who int
		at  time.Time
	}
	var (
		events          = make(chan event, 2*g)
		ctl             = make([]chan struct{}, g)
		live, maxLive   atomic.Int64
		errs            atomic.Int64
		firstErr        atomic.Pointer[error]
		relSent         atomic.Int64
		relLat          = make([][]time.Duration, g)
		wg              sync.WaitGroup
		measuring       atomic.Bool
		releaseWithin   = 5 * time.Second
		handoffs        []time.Duration
		fail            = func(err error) { errs.Add(1); firstErr.CompareAndSwap(nil, &err) }
		releaseDetached = func(rel func(context.Context) error) error {
			c, cancel := context.WithTimeout(context.Background(), releaseWithin)
			defer cancel()
			return rel(c)
		}
	)
	for i := range g {
		ctl[i] = make(chan struct{}, 2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := lockers[i%2]
			for {
				rel, err := l.acquire(runCtx, name)
				if err != nil {
					if runCtx.Err() == nil {
						fail(err)
					}
					return
				}
				got := time.Now()
				now := live.Add(1)
				for m := maxLive.Load(); now > m && !maxLive.CompareAndSwap(m, now); m = maxLive.Load() {
				}
				events <- event{i, got}
				select {
				case <-ctl[i]:
				case <-runCtx.Done():
					live.Add(-1)
					if err := releaseDetached(rel); err != nil {
						fail(err)
					}
					return
				}
				live.Add(-1)
				t0 := time.Now()
				relSent.Store(t0.UnixNano())
				err = releaseDetached(rel)
				if measuring.Load() {
					relLat[i] = append(relLat[i], time.Since(t0))
				}
				if err != nil {
					fail(err)
					return
				}
				// Wait until a waiter holds the permit: the releaser
				// does not race the waiters for it.
				select {
				case <-ctl[i]:
				case <-runCtx.Done():
					return
				}
			}
		}()
	}
	next := func() (event, error) {
		t := time.NewTimer(releaseWithin)
		defer t.Stop()
		select {
		case ev := <-events:
			return ev, nil
		case <-t.C:
			return event{}, fmt.Errorf("no acquisition within %v", releaseWithin)
		}
	}
	var holders []int
	var err error
	for len(holders) < n && err == nil {
		var ev event
		if ev, err = next(); err == nil {
			holders = append(holders, ev.who)
		}
	}
	if err == nil {
		// Let the others find the semaphore full and wait.
		time.Sleep(20 * time.Millisecond)
		hooks[0].reset()
		hooks[1].reset()
		measuring.Store(true)
		start := time.Now()
		for time.Since(start) < d && errs.Load() == 0 {
			h := holders[0]
			holders = holders[1:]
			ctl[h] <- struct{}{}
			ev, e := next()
			if e != nil {
				err = fmt.Errorf("a permit was released and %w", e)
				break
			}
			handoffs = append(handoffs, ev.at.Sub(time.Unix(0, relSent.Load())))
			holders = append(holders, ev.who)
			ctl[h] <- struct{}{}
		}
		r.Seconds = time.Since(start).Seconds()
		measuring.Store(false)
	}
	r.CmdsPerHand = float64(hooks[0].cmds.Load()+hooks[1].cmds.Load()) / float64(max(len(handoffs), 1))
	cancel()
	wg.Wait()
	var rels []time.Duration
	for i := range g {
		rels = append(rels, relLat[i]...)
	}
	r.Handoffs = int64(len(handoffs))
	if r.Seconds > 0 {
		r.PerSec = float64(r.Handoffs) / r.Seconds
	}
	r.Handoff, r.Release = summarize(handoffs), summarize(rels)
	if r.Release.P50 > 0 {
		r.P50Trips = float64(r.Handoff.P50) / float64(r.Release.P50)
		r.P99Trips = float64(r.Handoff.P99) / float64(r.Release.P50)
	}
	r.MaxLive = maxLive.Load()
	r.Errors = errs.Load()
	if r.Errors > 0 {
		return r, fmt.Errorf("%d errors, the first: %w", r.Errors, *firstErr.Load())
	}
	return r, err
}

// rwMixOnce runs readers and writers of one tenure read-write lock at once
// and counts, as each gets its lock, who else holds it: a writer must find
// nobody, a reader no writer. Readers hold for a moment so that they
// overlap one another; writers pause between locks so that readers get in.
func rwMixOnce(ctx context.Context, addr string, g, writers int, d time.Duration, name string) (rwMixResult, error) {
	r := rwMixResult{Goroutines: g, Writers: writers}
	var ks [2]*rwlock.Locker
	for i := range ks {
		c, _ := newClient(addr, g/2+2)
		defer c.Close()
		m, err := newManager(c)
		if err != nil {
			return r, err
		}
		defer m.Close()
		ks[i] = rwlock.New(m)
	}
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		readers, writing, maxReaders atomic.Int64
		reads, writes, overlaps      atomic.Int64
		errs                         atomic.Int64
		firstErr                     atomic.Pointer[error]
		wg                           sync.WaitGroup
	)
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, write := ks[i%2], i < writers
			for runCtx.Err() == nil {
				lock, mine, other := k.RLock, &readers, &writing
				if write {
					lock, mine, other = k.Lock, &writing, &readers
				}
				l, err := lock(runCtx, name)
				if err != nil {
					if runCtx.Err() == nil {
						errs.Add(1)
						firstErr.CompareAndSwap(nil, &err)
					}
					return
				}
				now := mine.Add(1)
				if other.Load() > 0 || (write && now > 1) {
					overlaps.Add(1)
				}
				if write {
					writes.Add(1)
				} else {
					reads.Add(1)
					for m := maxReaders.Load(); now > m && !maxReaders.CompareAndSwap(m, now); m = maxReaders.Load() {
					}
					time.Sleep(200 * time.Microsecond)
				}
				mine.Add(-1)
				relCtx, relCancel := context.WithTimeout(context.Background(), 5*time.Second)
				err = l.Release(relCtx)
				relCancel()
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				if write {
					time.Sleep(2 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	r.Seconds = d.Seconds()
	r.Reads, r.Writes, r.MaxReaders, r.Overlaps = reads.Load(), writes.Load(), maxReaders.Load(), overlaps.Load()
	if errs.Load() > 0 {
		return r, fmt.Errorf("%d errors, the first: %w", errs.Load(), *firstErr.Load())
	}
	return r, nil
}
