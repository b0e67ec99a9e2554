package main

// Scenario 6, where the floor is: acquire + release of fresh names from one
// goroutine on a Redis server of its own, by Redis's own accounting (INFO
// commandstats, after FLUSHALL and CONFIG RESETSTAT before each variant).
// The floor is (1) SET NX PX + a compare-and-delete script; (2) to (4) each
// add one step of tenure's acquire.lua to the one before: the SET inside a
// script, tenure's fence, acquire.lua's EXISTS; (5) is tenure itself
// (TryAcquire + Release), (6) and (7) each side of it alone: release.lua
// after variant 2's acquire, acquire.lua before a compare-and-delete; (8)
// is tenure before issue 50 (legacy50.go), for the before and after in
// one run; (9) is (5) with lease.WithReleaseMemory(0), without the
// release's marker. The scripts of 2 to 4 are the bench's own (below); 5 to 7 run
// the library's, 8 the library's of commit 33b741b.
// Per cycle it reports each command's calls and µs, those called from
// scripts, Redis µs, EVALSHA µs per call, Redis CPU (INFO cpu) and client
// wall time, each variant against variant 1.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/lease"
)

// floorTTL is the TTL of every variant, as in scenario 1.
const floorTTL = 10 * time.Second

// The bench's own scripts. Each adds one step of tenure's acquire.lua
// (internal/backend/scripts) to the one before; none is the library's.
const (
	// floorSetScript is SET NX PX inside a script: what running a script
	// costs over sending the command.
	floorSetScript = `return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])`

	// floorFenceScript takes the name and computes the fence as acquire.lua
	// does on its common path: max(counter + 1, server time in µs), the
	// clock written and the old counter read by one SET ... GET. KEYS
	// lease, fence.
	floorFenceScript = `
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
local now = redis.call('TIME')
local f = tonumber(now[1]) * 1000000 + tonumber(now[2])
local c = tonumber(redis.call('SET', KEYS[2], string.format('%.0f', f), 'PX', ARGV[2], 'GET'))
if c and c + 1 > f then
  f = c + 1
  redis.call('SET', KEYS[2], string.format('%.0f', f), 'PX', ARGV[2])
end
return f`

	// floorExistsScript is acquire.lua's common path: one EXISTS of the
	// request's abandon marker and the fair queue (a single call, as
	// acquire.lua makes it) before the SET. KEYS lease, fence, marker,
	// queue.
	floorExistsScript = `
if redis.call('EXISTS', KEYS[3], KEYS[4]) > 0 then
  return -1
end` + floorFenceScript
)

type floorCmd struct {
	Name      string
	Inner     bool    // called from inside a script, not sent by the client
	Calls     float64 // per cycle
	UsecCall  float64
	UsecCycle float64
}

type floorResult struct {
	Variant  int
	Name     string
	Note     string
	Run      int
	Cycles   int64
	Seconds  float64
	ClientUs float64 // wall time per cycle, one goroutine, µs
	// RedisUs is the usec commandstats gives the commands the client sent,
	// per cycle. A script's usec includes its inner calls (which
	// commandstats also counts on their own), so they are not added again.
	RedisUs    float64
	CPUUs      float64 // server CPU per cycle (INFO cpu): adds reading, parsing, replying and expiry
	EvalshaUs  float64 // EVALSHA usec per call (an average when a cycle sends two scripts)
	InnerCalls float64 // commands called from scripts, per cycle
	Commands   []floorCmd
	Errors     int64
	// Mixed names commands both sent by the client and called by a script,
	// whose script calls RedisUs then counts twice; the variants avoid it.
	Mixed []string `json:",omitempty"`
}

// A floorVariant builds the cycle it measures on c: acquire name, then
// release it; done undoes the setup.
type floorVariant struct {
	Name, Note string
	new        floorBuild
}

// A floorCycle acquires a name and releases it; a floorBuild makes one on a
// client, with what undoes its setup.
type (
	floorCycle = func(ctx context.Context, name string) error
	floorBuild = func(c *redis.Client) (cycle floorCycle, done func() error, err error)
)

var (
	errFloorNotTaken = errors.New("a fresh name was not taken")
	errFloorNotHeld  = errors.New("the release found the name not held")
)

func floorVariants() []floorVariant {
	k := &floorKit{layout: keys.Layout{Prefix: lease.DefaultKeyPrefix}, ttlMs: floorTTL.Milliseconds()}
	l := k.layout
	return []floorVariant{
		{Name: "SET NX PX + compare-and-delete", Note: "a bare SET NX PX, then EVALSHA of GET, compare, DEL (redislock v0.9.4 sends its SET inside a script: variant 2)",
			new: k.raw},
		{Name: "script(SET NX PX) + compare-and-delete", Note: "the SET inside a script",
			new: k.scripted(floorSetScript, func(name, _ string) []string { return []string{l.Lease(name)} })},
		{Name: "script(SET NX PX, fence) + compare-and-delete", Note: "plus the fence as tenure computes it: TIME, SET fence-key time PX ttl GET, compare",
			new: k.scripted(floorFenceScript, func(name, _ string) []string { return []string{l.Lease(name), l.Fence(name)} })},
		{Name: "script(EXISTS, SET NX PX, fence) + compare-and-delete", Note: "plus acquire.lua's one EXISTS of the abandon marker and the queue",
			new: k.scripted(floorExistsScript, func(name, tok string) []string {
				return []string{l.Lease(name), l.Fence(name), l.Retired(name, tok), l.Queue(name)}
			})},
		{Name: "tenure TryAcquire + Release", Note: "lease.Manager with the library's acquire.lua and release.lua, no waiters",
			new: k.tenure()},
		{Name: "script(SET NX PX) + tenure's release.lua", Note: "tenure's release side alone: variant 2's acquire, then the library's release.lua (GET, compare, DEL, SET marker PX, PUBLISH); compare with 2",
			new: k.release},
		{Name: "tenure's acquire.lua + compare-and-delete", Note: "tenure's acquire side alone: the library's acquire.lua (the commands of 4, in the library's script), then compare-and-delete; compare with 4",
			new: k.acquire},
		{Name: "tenure before issue 50: its acquire.lua + release.lua", Note: "the library's scripts of commit 33b741b (bench/legacy50), on the same keys; compare with 5",
			new: k.legacy},
		{Name: "tenure TryAcquire + Release, WithReleaseMemory(0)", Note: "variant 5 without the release's marker (SET PX): a release resent after a lost reply answers ErrNotHeld; compare with 5",
			new: k.tenure(noReleaseMemory()...)},
	}
}

// floorKit builds the variants: what they share is the key layout, one
// source of tokens, and the raw halves of a cycle.
type floorKit struct {
	layout keys.Layout
	ttlMs  int64
	seq    uint64
}

func floorNoDone() error { return nil }

func (k *floorKit) token() string {
	k.seq++
	return fmt.Sprintf("%016x%016x", k.seq, time.Now().UnixNano())
}

func (k *floorKit) setNX(ctx context.Context, c *redis.Client, key, tok string) error {
	err := c.Do(ctx, "set", key, tok, "nx", "px", k.ttlMs).Err()
	if err == redis.Nil {
		return errFloorNotTaken
	}
	return err
}

// cad releases by compare-and-delete.
func (k *floorKit) cad(ctx context.Context, c *redis.Client, key, tok string) error {
	n, err := compareAndDelete.Run(ctx, c, []string{key}, tok).Int()
	if err == nil && n != 1 {
		err = errFloorNotHeld
	}
	return err
}

// raw is variant 1: SET NX PX, then compare-and-delete.
func (k *floorKit) raw(c *redis.Client) (floorCycle, func() error, error) {
	return func(ctx context.Context, name string) error {
		tok, key := k.token(), k.layout.Lease(name)
		if err := k.setNX(ctx, c, key, tok); err != nil {
			return err
		}
		return k.cad(ctx, c, key, tok)
	}, floorNoDone, nil
}

// scripted acquires by the script src on keysOf's keys (the lease key
// first) and releases by compare-and-delete: variants 2 to 4.
func (k *floorKit) scripted(src string, keysOf func(name, tok string) []string) floorBuild {
	s := redis.NewScript(src)
	return func(c *redis.Client) (floorCycle, func() error, error) {
		return func(ctx context.Context, name string) error {
			tok := k.token()
			ks := keysOf(name, tok)
			v, err := s.Run(ctx, c, ks, tok, k.ttlMs).Result()
			switch {
			case err == redis.Nil:
				return errFloorNotTaken
			case err != nil:
				return err
			case v == int64(0) || v == int64(-1):
				return errFloorNotTaken
			}
			return k.cad(ctx, c, ks[0], tok)
		}, floorNoDone, nil
	}
}

// tenure is variant 5, the library's whole cycle, on a manager with opts
// (variant 9's).
func (k *floorKit) tenure(opts ...lease.Option) func(c *redis.Client) (floorCycle, func() error, error) {
	return func(c *redis.Client) (floorCycle, func() error, error) {
		m, err := lease.New(c, append([]lease.Option{lease.WithTTL(floorTTL), lease.WithLogger(quietLogger)}, opts...)...)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, name string) error {
			l, err := m.TryAcquire(ctx, name)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}, m.Close, nil
	}
}

// release is variant 6: tenure's release.lua alone. The acquire is variant
// 2's script: a SET sent by the client would mix in commandstats with
// release.lua's SET of its marker.
func (k *floorKit) release(c *redis.Client) (floorCycle, func() error, error) {
	be := backend.NewRedis(c, k.layout.Prefix)
	setScript := redis.NewScript(floorSetScript)
	errs := make([]error, 1)
	return func(ctx context.Context, name string) error {
		tok, key := k.token(), k.layout.Lease(name)
		if err := setScript.Run(ctx, c, []string{key}, tok, k.ttlMs).Err(); err != nil {
			if err == redis.Nil {
				err = errFloorNotTaken
			}
			return err
		}
		errs[0] = nil
		be.Release(ctx, []backend.Item{{Name: name, Token: tok, TTL: floorTTL}}, errs)
		return errs[0]
	}, floorNoDone, nil
}

// acquire is variant 7: tenure's acquire.lua alone, then compare-and-delete.
func (k *floorKit) acquire(c *redis.Client) (floorCycle, func() error, error) {
	be := backend.NewRedis(c, k.layout.Prefix)
	return func(ctx context.Context, name string) error {
		tok := k.token()
		a, err := be.Acquire(ctx, backend.Request{Name: name, Token: tok, TTL: floorTTL})
		switch {
		case err != nil:
			return err
		case !a.Acquired:
			return errFloorNotTaken
		}
		return k.cad(ctx, c, k.layout.Lease(name), tok)
	}, floorNoDone, nil
}

func runFloor(ctx context.Context, cfg runConfig) ([]floorResult, error) {
	// A server of its own: no keys, clients or expiries of other scenarios.
	srv, err := startLoopbackServer()
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	admin := redis.NewClient(srv.Options())
	defer admin.Close()
	c, _ := newClient(srv.Addr(), 1)
	defer c.Close()
	fm := &floorMeter{admin: admin, names: &nameHook{}}
	c.AddHook(fm.names)
	vs := floorVariants()
	cycles := make([]floorCycle, len(vs))
	var dones []func() error
	defer func() {
		for i := len(dones) - 1; i >= 0; i-- {
			_ = dones[i]() // a second Close is harmless
		}
	}()
	for i, v := range vs {
		cy, done, err := v.new(c)
		if err != nil {
			return nil, err
		}
		cycles[i], dones = cy, append(dones, done)
	}
	var seq int
	next := func() string { seq++; return "floor-" + strconv.Itoa(seq) }
	var out []floorResult
	for run := range cfg.runs {
		for k := range vs {
			i := (k + run) % len(vs)
			r, err := fm.measure(ctx, vs[i], i+1, cycles[i], cfg.floorDur, next)
			if err != nil {
				return out, err
			}
			r.Run = run
			cfg.logf("  floor run %d variant %d %-52s %6.1fµs/cycle client, redis %5.1fµs (cpu %5.1fµs), evalsha %5.1fµs/call, %.1f inner calls", run, i+1, r.Name, r.ClientUs, r.RedisUs, r.CPUUs, r.EvalshaUs, r.InnerCalls)
			out = append(out, r)
			if r.Errors > 0 {
				return out, fmt.Errorf("floor %d (%s): %d errors", i+1, r.Name, r.Errors)
			}
		}
	}
	for _, done := range dones {
		if err := done(); err != nil {
			return out, err
		}
	}
	return out, nil
}

// floorMeter measures cycles on the server admin talks to; names counts
// what the cycles' client sends, to tell it from what scripts call.
type floorMeter struct {
	admin *redis.Client
	names *nameHook
}

// measure runs a variant's cycle for d on an emptied server whose
// statistics were reset after a warm-up.
func (fm *floorMeter) measure(ctx context.Context, v floorVariant, variant int, cycle floorCycle, d time.Duration, next func() string) (floorResult, error) {
	if err := fm.admin.FlushAll(ctx).Err(); err != nil {
		return floorResult{}, err
	}
	// Warm up: scripts loaded, connection open.
	for range 64 {
		if err := cycle(ctx, next()); err != nil {
			return floorResult{}, fmt.Errorf("floor %d: %w", variant, err)
		}
	}
	fm.names.reset()
	if err := fm.admin.ConfigResetStat(ctx).Err(); err != nil {
		return floorResult{}, err
	}
	rc := redisCPU(ctx, fm.admin)
	r := floorResult{Variant: variant, Name: v.Name, Note: v.Note}
	t0 := time.Now()
	for time.Since(t0) < d {
		if err := cycle(ctx, next()); err != nil {
			r.Errors++
		}
		r.Cycles++
	}
	el := time.Since(t0)
	r.CPUUs = (redisCPU(ctx, fm.admin) - rc) * 1e6 / float64(max(r.Cycles, 1))
	stats, err := commandStats(ctx, fm.admin)
	if err != nil {
		return r, err
	}
	r.Seconds = el.Seconds()
	r.ClientUs = el.Seconds() * 1e6 / float64(max(r.Cycles, 1))
	fm.account(&r, stats)
	return r, nil
}

// account fills in r's commands from commandstats: the time of those the
// client sent is RedisUs; those only scripts called are inner calls, their
// time already in the script's.
func (fm *floorMeter) account(r *floorResult, stats map[string]cmdCount) {
	cyc := float64(max(r.Cycles, 1))
	for name, s := range stats {
		if name == "info" || name == "config|resetstat" {
			continue // the admin's own
		}
		sent := fm.names.sent(name)
		fc := floorCmd{Name: name, Inner: sent == 0, Calls: float64(s.calls) / cyc, UsecCycle: float64(s.usec) / cyc}
		if s.calls > 0 {
			fc.UsecCall = float64(s.usec) / float64(s.calls)
		}
		if fc.Inner {
			r.InnerCalls += fc.Calls
		} else {
			r.RedisUs += fc.UsecCycle
			if s.calls > sent {
				// Sent by the client and called by a script too:
				// commandstats cannot split the time, so RedisUs
				// counts the script's calls twice. Say so.
				r.InnerCalls += float64(s.calls-sent) / cyc
				r.Mixed = append(r.Mixed, name)
			}
		}
		if name == "evalsha" {
			r.EvalshaUs = fc.UsecCall
		}
		r.Commands = append(r.Commands, fc)
	}
	slices.SortFunc(r.Commands, func(a, b floorCmd) int {
		if a.Inner != b.Inner {
			if a.Inner {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// floorMedian is the median over runs of one floor variant.
type floorMedian struct {
	variant                   int
	name, note                string
	runs                      int
	redisUs, evalshaUs, inner float64
	clientUs, cpuUs           float64
	cmds                      []floorCmd
}

func floorMedians(r *results) []floorMedian {
	var out []floorMedian
	vs := group(r.Floor, func(f floorResult) int { return f.Variant })
	slices.Sort(vs)
	for _, v := range vs {
		rs := filter(r.Floor, func(f floorResult) bool { return f.Variant == v })
		fm := floorMedian{
			variant: v, name: rs[0].Name, note: rs[0].Note, runs: len(rs),
			redisUs:   medianOf(rs, func(f floorResult) float64 { return f.RedisUs }),
			evalshaUs: medianOf(rs, func(f floorResult) float64 { return f.EvalshaUs }),
			inner:     medianOf(rs, func(f floorResult) float64 { return f.InnerCalls }),
			clientUs:  medianOf(rs, func(f floorResult) float64 { return f.ClientUs }),
			cpuUs:     medianOf(rs, func(f floorResult) float64 { return f.CPUUs }),
		}
		var all []floorCmd
		for _, f := range rs {
			all = append(all, f.Commands...)
		}
		for _, name := range group(all, func(c floorCmd) string { return c.Name }) {
			cs := filter(all, func(c floorCmd) bool { return c.Name == name })
			fm.cmds = append(fm.cmds, floorCmd{
				Name: name, Inner: cs[0].Inner,
				Calls:     medianOf(cs, func(c floorCmd) float64 { return c.Calls }),
				UsecCall:  medianOf(cs, func(c floorCmd) float64 { return c.UsecCall }),
				UsecCycle: medianOf(cs, func(c floorCmd) float64 { return c.UsecCycle }),
			})
		}
		out = append(out, fm)
	}
	return out
}

func floorSection(b *strings.Builder, r *results) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	ms := floorMedians(r)
	p("\n## 6. Where the floor is\n\n")
	p("Acquire + release of a fresh name in a loop, one goroutine, one client, on a Redis server of its own, emptied (FLUSHALL) and its statistics reset (CONFIG RESETSTAT) before each variant; ")
	p("each variant runs for a fixed time, the variants in a rotating order; medians over %d run(s). Each variant adds one step of tenure's acquire.lua to the one above; the scripts of 2–4 are the bench's own, 5 and 6 run the library's. ", ms[0].runs)
	p("Redis µs/cycle is what INFO commandstats times for the commands the client sent (usec ÷ cycles): a script's usec includes the commands it calls, which commandstats also lists (as inner calls) and which are not added again. ")
	p("commandstats times execution only; Redis CPU/cycle (INFO cpu) adds reading, parsing and replying, and expiring the fence keys and release markers left behind, and is noisier. ")
	p("Client µs/cycle is wall time per cycle, round trips included.\n\n")
	p("| # | variant | Redis µs/cycle | EVALSHA µs/call | inner calls/cycle | client µs/cycle | Redis µs vs 1 | client µs vs 1 | Redis CPU/cycle (INFO cpu) |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	base := ms[0]
	for _, m := range ms {
		p("| %d | %s | %.2f | %.2f | %.1f | %.1f | %+.2f | %+.1f | %.1fµs |\n", m.variant, m.name, m.redisUs, m.evalshaUs, m.inner, m.clientUs, m.redisUs-base.redisUs, m.clientUs-base.clientUs, m.cpuUs)
	}
	p("\nEvery command per cycle (medians), as commandstats shows it; \"script\" means called from inside a script, whose time is part of the EVALSHA's:\n\n")
	p("| # | command | sent by | calls/cycle | µs/call | µs/cycle |\n|---:|---|---|---:|---:|---:|\n")
	for _, m := range ms {
		for _, c := range m.cmds {
			by := "client"
			if c.Inner {
				by = "script"
			}
			p("| %d | %s | %s | %.2f | %.2f | %.2f |\n", m.variant, strings.ToUpper(c.Name), by, c.Calls, c.UsecCall, c.UsecCycle)
		}
	}
	p("\nVariants:\n\n")
	for _, m := range ms {
		p("%d. %s: %s\n", m.variant, m.name, m.note)
	}
	for _, f := range r.Floor {
		if len(f.Mixed) > 0 {
			p("\n**Caution:** variant %d sent %v itself and also called it from a script; commandstats cannot split their time, so its Redis µs/cycle counts those script calls twice.\n", f.Variant, f.Mixed)
			break
		}
	}
}
