// Scenario 9, layout (issue 32, target 1): what one key per name would save.
//
// It measures Redis CPU per uncontended cycle (acquire + release of a fresh
// name, 32 goroutines, one client, INFO cpu over the loop) of tenure as it
// is and of prototypes of other key layouts, against redislock measured in
// the same run, in a rotating order. The prototypes are this file's own
// scripts, not the library's: each keeps only the steps its label names, so
// that the table shows what each step of tenure's promises costs on the
// server:
//
//   - twokey: the lock key holds the token, a separate counter key the fence
//     (tenure's layout): SET NX PX, TIME, SET counter ... GET; release GET,
//     DEL, PUBLISH. "+exists" adds acquire.lua's EXISTS of the abandon marker
//     and the fair queue; "+marker" adds release.lua's marker key (SET PX), by
//     which a resent release gets its first answer ("marker100ms" keeps it
//     100 ms instead of 10s). "+incounter" keeps the release's answer
//     elsewhere: the release writes its id into the counter after the fence
//     (SET ... GET of the counter, which exists, instead of a new key), and
//     an acquisition that finds an id there moves it to a marker key of its
//     own, so that a copy resent after the name was taken again still finds
//     it (TestInCounterPrototypeKeepsItsPromises). It leaves out what tenure
//     would add to it: refusing a late copy of an acquisition whose token
//     was released, which the marker key does today (acquire.lua's EXISTS).
//   - onekey: the layout issue 32 suggests: one key per name whose value
//     carries the fence while held and, once released, a free value with the
//     last fence and the releasing token, living on for "free" ms. Acquire
//     GET, TIME, SET; release GET, SET free value, PUBLISH. "+exists" as
//     above; "del" deletes the key at release instead (no fence and no
//     release remembered: a floor, not a design that keeps the promises).
//
// Run it with `go run . -layout` (writes layout.md to -out).
package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/lease"
)

// layoutAcquire is the one-key acquire: KEYS[1] the name's key, KEYS[2..3]
// the abandon marker and the queue (checked when ARGV[3] is '1'); ARGV[1]
// the token, ARGV[2] the TTL (ms). Returns the fence, or {0, wait}.
var layoutAcquire = redis.NewScript(`
if ARGV[3] == '1' and redis.call('EXISTS', KEYS[2], KEYS[3]) > 0 then return {0, -2} end
local v = redis.call('GET', KEYS[1])
local last = 0
if v then
  if string.byte(v, 1) ~= 102 then
    return {0, redis.call('PTTL', KEYS[1])}
  end
  last = tonumber(string.match(v, '^f(%d+)'))
end
local t = redis.call('TIME')
local f = tonumber(t[1]) * 1000000 + tonumber(t[2])
if last >= f then f = last + 1 end
redis.call('SET', KEYS[1], 'h' .. string.format('%.0f', f) .. ':' .. ARGV[1], 'PX', ARGV[2])
return f
`)

// layoutRelease is the one-key release: KEYS[1] the name's key; ARGV[1]
// the held value, ARGV[2] how long the free value lives (ms; '0': DEL).
// Returns 1 if ARGV[1] held the name, else 0.
var layoutRelease = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v ~= ARGV[1] then return 0 end
if ARGV[2] == '0' then
  redis.call('DEL', KEYS[1])
else
  local f = string.match(v, '^h(%d+)')
  redis.call('SET', KEYS[1], 'f' .. f .. ':' .. string.sub(v, #f + 3), 'PX', ARGV[2])
end
redis.call('PUBLISH', KEYS[1] .. ':released', 'released')
return 1
`)

// twoKeyAcquire is tenure's layout, trimmed: KEYS[1] the lock key, KEYS[2]
// the counter, KEYS[3..4] the abandon marker and the queue (checked when
// ARGV[3] is '1'); ARGV[1] the token, ARGV[2] the TTL. Returns the fence,
// or {0, wait}. A counter holding "fence:id" (+incounter's release) has
// the id moved to the marker key P{N}:retired:<id>, for ARGV[2] ms.
var twoKeyAcquire = redis.NewScript(`
if ARGV[3] == '1' and redis.call('EXISTS', KEYS[3], KEYS[4]) > 0 then return {0, -2} end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {0, redis.call('PTTL', KEYS[1])} end
local t = redis.call('TIME')
local f = tonumber(t[1]) * 1000000 + tonumber(t[2])
local c = redis.call('SET', KEYS[2], string.format('%.0f', f), 'PX', 2 * tonumber(ARGV[2]), 'GET')
if c then
  local n, op = string.match(c, '^(%d+):(%x+)$')
  if op then
    redis.call('SET', KEYS[1] .. ':retired:' .. op, '1', 'PX', ARGV[2])
    c = n
  end
end
if c and tonumber(c) + 1 > f then
  f = tonumber(c) + 1
  redis.call('SET', KEYS[2], string.format('%.0f', f), 'PX', 2 * tonumber(ARGV[2]))
end
return f
`)

// twoKeyRelease: KEYS[1] the lock key, KEYS[2] the release's marker,
// KEYS[3] the counter (+incounter only); ARGV[1] the token, ARGV[2] the
// marker's life (ms; '0': no marker); +incounter only: ARGV[3] the
// release's id, ARGV[4] the lease's fence, written to the counter as
// "fence:id" for ARGV[2] ms (a counter found above the fence is kept).
// Returns 1 if ARGV[1] held the name (or the marker, or the counter, says
// it did), else 0.
var twoKeyRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  if ARGV[3] and string.find(redis.call('GET', KEYS[3]) or '', ':' .. ARGV[3], 1, true) then return 1 end
  return redis.call('EXISTS', KEYS[2])
end
redis.call('DEL', KEYS[1])
if ARGV[3] then
  local old = redis.call('SET', KEYS[3], ARGV[4] .. ':' .. ARGV[3], 'PX', ARGV[2], 'GET')
  local n = old and tonumber(string.match(old, '^%d+'))
  if n and n > tonumber(ARGV[4]) then
    redis.call('SET', KEYS[3], string.format('%.0f', n) .. ':' .. ARGV[3], 'PX', ARGV[2])
  end
elseif ARGV[2] ~= '0' then redis.call('SET', KEYS[2], '1', 'PX', ARGV[2]) end
redis.call('PUBLISH', KEYS[1] .. ':released', 'released')
return 1
`)

// protoLocker runs one prototype layout.
type protoLocker struct {
	c      *redis.Client
	ttl    time.Duration
	oneKey bool
	exists bool
	memory time.Duration // onekey: the free value's life (0: DEL); twokey: the marker's (0: none)
	// inCounter (twokey): the release's marker is the op written into the
	// counter after the fence, moved to a key of its own only when the
	// name is taken again while it lives.
	inCounter bool
	seq       atomic.Uint64
}

func (p *protoLocker) id() string {
	return nextToken(&p.seq)
}

func (p *protoLocker) acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	token, ex := p.id(), "0"
	if p.exists {
		ex = "1"
	}
	ttl, mem := p.ttl.Milliseconds(), p.memory.Milliseconds()
	var rel func(ctx context.Context, f int64) *redis.Cmd
	var r any
	var err error
	if p.oneKey {
		r, err = layoutAcquire.Run(ctx, p.c, []string{key, key + ":retired:" + token, key + ":queue"}, token, ttl, ex).Result()
		rel = func(ctx context.Context, f int64) *redis.Cmd {
			return layoutRelease.Run(ctx, p.c, []string{key}, "h"+strconv.FormatInt(f, 10)+":"+token, mem)
		}
	} else {
		r, err = twoKeyAcquire.Run(ctx, p.c, []string{key, key + ":fence", key + ":retired:" + token, key + ":queue"}, token, ttl, ex).Result()
		op := p.id()
		rel = func(ctx context.Context, f int64) *redis.Cmd {
			if p.inCounter {
				return twoKeyRelease.Run(ctx, p.c, []string{key, key + ":retired:" + op, key + ":fence"}, token, mem, op, f)
			}
			return twoKeyRelease.Run(ctx, p.c, []string{key, key + ":retired:" + op}, token, mem)
		}
	}
	if err != nil {
		return nil, err
	}
	f, ok := r.(int64)
	if !ok {
		return nil, errors.New("layout prototype: name held")
	}
	return func(ctx context.Context) error {
		n, err := rel(ctx, f).Int()
		if err == nil && n != 1 {
			err = errors.New("layout prototype: not held")
		}
		return err
	}, nil
}

func (p *protoLocker) close() error { return nil }

type layoutVariant struct {
	name, note string
	new        func(c *redis.Client, ttl time.Duration) (locker, error)
}

func protoVariant(name, note string, oneKey, exists bool, memory time.Duration) layoutVariant {
	return layoutVariant{name, note, func(c *redis.Client, ttl time.Duration) (locker, error) {
		return &protoLocker{c: c, ttl: ttl, oneKey: oneKey, exists: exists, memory: memory}, nil
	}}
}

// inCounterVariant is twokey with the release's marker kept in the counter.
func inCounterVariant(name, note string) layoutVariant {
	return layoutVariant{name, note, func(c *redis.Client, ttl time.Duration) (locker, error) {
		return &protoLocker{c: c, ttl: ttl, exists: true, memory: ttl, inCounter: true}, nil
	}}
}

func layoutVariants() []layoutVariant {
	return []layoutVariant{
		{"redislock", "bsm/redislock v0.9.4: EVALSHA of SET NX PX; EVALSHA of GET, DEL", redislockImpl(0).new},
		{"tenure", "lease.Manager: the library's acquire.lua and release.lua", tenureImpl().new},
		{"tenure-nomemory", "lease.Manager with WithReleaseMemory(0): the same without the release's marker (a release resent after a lost reply answers ErrNotHeld)", tenureImpl(noReleaseMemory()...).new},
		{"tenure-scripts", "the library's acquire.lua and release.lua through internal/backend, without lease.Manager: the same path as tenure-before-50's", func(c *redis.Client, ttl time.Duration) (locker, error) {
			return &backendLocker{be: backend.NewRedis(c, lease.DefaultKeyPrefix), ttl: ttl}, nil
		}},
		{"tenure-before-50", "the library's acquire.lua and release.lua of commit 33b741b, before issue 50 (bench/legacy50), on the same keys", func(c *redis.Client, ttl time.Duration) (locker, error) {
			return &legacyLocker{c: c, ttl: ttl}, nil
		}},
		protoVariant("twokey+exists+marker", "tenure's steps in a trimmed script: the baseline for the prototypes", false, true, 10*time.Second),
		inCounterVariant("twokey+exists+incounter", "the release's marker written into the counter after the fence (one SET ... GET of a key that exists), moved to a key of its own when the name is taken again while it lives"),
		protoVariant("twokey+exists+marker100ms", "the marker kept 100 ms instead of 10s: what a key left behind costs", false, true, 100*time.Millisecond),
		protoVariant("twokey+marker", "without the EXISTS", false, false, 10*time.Second),
		protoVariant("twokey+exists", "without the release marker", false, true, 0),
		protoVariant("twokey", "without both", false, false, 0),
		protoVariant("onekey+exists", "one key per name, free value for 10s, with the EXISTS", true, true, 10*time.Second),
		protoVariant("onekey", "one key per name, free value for 10s", true, false, 10*time.Second),
		protoVariant("onekey-del", "one key per name, deleted at release: the floor of any layout that publishes", true, false, 0),
	}
}

// runLayout measures every variant reps times, in a rotating order, on a
// redis-server of its own, and writes layout.md to outDir.
func runLayout(ctx context.Context, cfg runConfig, outDir string, reps int, d time.Duration) error {
	srv, err := startLoopbackServer()
	if err != nil {
		return err
	}
	defer srv.Stop()
	vs := layoutVariants()
	ls := make([]locker, len(vs))
	for i, v := range vs {
		c, _ := newClient(srv.Addr(), 36)
		defer c.Close()
		if ls[i], err = v.new(c, 10*time.Second); err != nil {
			return err
		}
		defer ls[i].close()
	}
	admin, _ := newClient(srv.Addr(), 1)
	defer admin.Close()
	us, err := layoutRuns(ctx, cfg, admin, vs, ls, reps, d)
	if err != nil {
		return err
	}
	return writeReport(outDir, "layout.md", layoutReport(vs, us, reps, d))
}

// layoutRuns returns, per variant, Redis CPU µs per cycle of each run.
func layoutRuns(ctx context.Context, cfg runConfig, admin *redis.Client, vs []layoutVariant, ls []locker, reps int, d time.Duration) ([][]float64, error) {
	us := make([][]float64, len(vs))
	var seq atomic.Int64
	for run := range reps {
		for k := range vs {
			i := (k + run) % len(vs)
			_ = cycleLoop(ctx, ls[i], 32, 0, 256, &seq) // scripts loaded, pool warm
			if err := admin.FlushAll(ctx).Err(); err != nil {
				return nil, err
			}
			c0 := redisCPU(ctx, admin)
			r := cycleLoop(ctx, ls[i], 32, d, 0, &seq)
			c1 := redisCPU(ctx, admin)
			if r.Errors > 0 || r.Ops == 0 {
				return nil, fmt.Errorf("layout %s: %d of %d cycles failed", vs[i].name, r.Errors, r.Ops)
			}
			us[i] = append(us[i], (c1-c0)*1e6/float64(r.Ops))
			cfg.logf("  layout run %d %-22s %7.0f cycles/s %6.1f µs Redis CPU/cycle", run, vs[i].name, r.OpsPerSec, us[i][len(us[i])-1])
		}
	}
	return us, nil
}

func layoutReport(vs []layoutVariant, us [][]float64, reps int, d time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Scenario 9: what one key per name would save\n\nGenerated by `go run . -layout` on %s UTC. Machine: %s; Go %s; Redis %s; load average %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04"), machine(), runtime.Version(), redisVersion(), loadAvg())
	fmt.Fprintf(&b, "Uncontended acquire + release of fresh names from 32 goroutines on one client, TTL 10s, %v a measurement, %d runs in a rotating order. Redis CPU is INFO cpu over the loop, and the ratio is taken within each run against redislock's (median, range).\n\n", d, reps)
	b.WriteString("| variant | what it runs | Redis CPU µs/cycle (median) | ÷ redislock (range) |\n|---|---|---:|---:|\n")
	for i, v := range vs {
		med, lo, hi := ratioSummary(us[i], us[0])
		fmt.Fprintf(&b, "| %s | %s | %.1f | %.2f× (%.2f–%.2f) |\n", v.name, v.note, median(us[i]), med, lo, hi)
	}
	return b.String()
}
