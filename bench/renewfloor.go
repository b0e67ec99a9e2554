// Scenario 11, renewal floor (issue 32, target 4): what a batched renewal
// costs Redis, step by step.
//
// One server holds N leases taken by the library's own acquire.lua. Each
// variant renews all of them, round after round, for a fixed time, and the
// Redis CPU (INFO cpu) it took is divided by the renewals; the variants run
// in a rotating order, and each is compared with tenure-per-item in the same
// run. As the watchdog does with its default interval (TTL/3), a third of
// the leases get a full renewal each round (the fencing counter refreshed
// too) and the rest a light one (the lease key alone): watchdog.Renewal.Light.
//
//   - tenure-per-item: the library's backend renewing each lease with its
//     own renew.lua call, 1000 to a pipeline: the per-item path.
//   - tenure: the library's backend as the watchdog calls it, 1000 leases a
//     Renew (renew_leases.lua, 256 a call, 4 calls a round trip).
//   - tenure-all-light: the same with every renewal light: the counter is
//     never touched, and would expire while its name is held.
//   - counter-pttl: this file's copy of renew_leases.lua as it was before
//     the counter's refresh became one PEXPIRE ... GT: PTTL of the lease key,
//     then PEXPIRE of the counter to one TTL past it.
//   - get-only, pexpire-only, args-only: this file's scripts that keep one
//     step each (the token compare, the PEXPIRE ... GT, the call with its
//     arguments and an empty loop over them): none is a renewal, each is a
//     floor under one.
//
// Run it with `go run . -renew-floor` (writes renewfloor.md to -out).
package main

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/lease"
)

// floorTTLRenew is the TTL the scenario's leases are taken and renewed
// with: long enough that none expires while the variants run.
const floorTTLRenew = 10 * time.Minute

// renewHead is the start of the prototype scripts: their KEYS and ARGV are
// renew_leases.lua's (KEYS[i] lease i's key, KEYS[n+j] a counter; ARGV[1]
// the TTL in ms, ARGV[2] n, ARGV[2+i] lease i's token, ARGV[2+n+j] the
// lease counter j belongs to).
const renewHead = `local ttl = ARGV[1]
local n = tonumber(ARGV[2])
`

var renewProtos = map[string]string{
	// renew_leases.lua before this scenario was written: the counter of a
	// full renewal one TTL past what its lease's key has, read back.
	"counter-pttl": renewHead + `local failed = {}
local renewed = {}
for i = 1, n do
  local key = KEYS[i]
  local v = redis.pcall('GET', key)
  if v == ARGV[i + 2] then
    redis.call('PEXPIRE', key, ttl, 'GT')
    renewed[i] = true
  else
    failed[#failed + 1] = i
    failed[#failed + 1] = v == false and -1 or 0
  end
end
for j = n + 1, #KEYS do
  local i = tonumber(ARGV[j + 2])
  if renewed[i] then
    redis.call('PEXPIRE', KEYS[j], redis.call('PTTL', KEYS[i]) + ttl)
  end
end
return failed`,
	"get-only": renewHead + `local held = 0
for i = 1, n do
  if redis.pcall('GET', KEYS[i]) == ARGV[i + 2] then held = held + 1 end
end
return held`,
	"pexpire-only": renewHead + `for i = 1, n do
  redis.call('PEXPIRE', KEYS[i], ttl, 'GT')
end
return 0`,
	"args-only": renewHead + `local same = 0
for i = 1, n do
  if KEYS[i] == ARGV[i + 2] then same = same + 1 end
end
return same`,
}

type renewVariant struct{ name, note string }

func renewVariants() []renewVariant {
	return []renewVariant{
		{"tenure-per-item", "the library, one renew.lua call a lease, 1000 to a pipeline (the baseline)"},
		{"tenure", "the library as the watchdog calls it: renew_leases.lua, 256 leases a call, a third of them full"},
		{"tenure-all-light", "the same, every renewal light: the counter never touched (it would expire while held)"},
		{"counter-pttl", "renew_leases.lua as it was: a full renewal reads the key's PTTL and sets the counter past it"},
		{"get-only", "the token compare alone (no PEXPIRE): a floor, not a renewal"},
		{"pexpire-only", "PEXPIRE … GT alone (no compare): a floor, not a renewal"},
		{"args-only", "the call and its arguments, an empty loop: a floor, not a renewal"},
	}
}

// renewBench is scenario 11's server, leases and the means to renew them.
type renewBench struct {
	c       *redis.Client
	admin   *redis.Client
	layout  keys.Layout
	items   []backend.Item
	batched *backend.Redis
	perItem *backend.Redis
	shas    map[string]string
}

func runRenewFloor(ctx context.Context, cfg runConfig, outDir string, n, reps int, d time.Duration) error {
	srv, err := startLoopbackServer()
	if err != nil {
		return err
	}
	defer srv.Stop()
	rb, err := newRenewBench(ctx, srv.Addr(), n)
	if err != nil {
		return err
	}
	defer rb.c.Close()
	defer rb.admin.Close()
	vs := renewVariants()
	us := make([][]float64, len(vs))
	for run := range reps {
		for k := range vs {
			i := (k + run) % len(vs)
			v, err := rb.measure(ctx, vs[i].name, d)
			if err != nil {
				return fmt.Errorf("renew floor %s: %w", vs[i].name, err)
			}
			us[i] = append(us[i], v)
			cfg.logf("  renew-floor run %d %-17s %5.2f µs Redis CPU/renewal", run, vs[i].name, v)
		}
	}
	return writeReport(outDir, "renewfloor.md", renewFloorReport(vs, us, n, reps, d))
}

// newRenewBench takes n leases with the library's acquire.lua and loads
// the prototype scripts.
func newRenewBench(ctx context.Context, addr string, n int) (*renewBench, error) {
	c, _ := newClient(addr, 8)
	admin, _ := newClient(addr, 1)
	rb := &renewBench{c: c, admin: admin, layout: keys.Layout{Prefix: lease.DefaultKeyPrefix}, shas: map[string]string{}}
	rb.batched = backend.NewRedis(c, rb.layout.Prefix)
	rb.perItem = backend.NewRedis(perItemClient{c}, rb.layout.Prefix)
	err := parallel(n, 32, func(i int) error {
		name, tok := fmt.Sprint("renew-", i), fmt.Sprintf("%032x", i*7919+1)
		a, err := rb.batched.Acquire(ctx, backend.Request{Name: name, Token: tok, TTL: floorTTLRenew})
		if err == nil && !a.Acquired {
			err = fmt.Errorf("%s not acquired", name)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	rb.items = make([]backend.Item, n)
	for i := range rb.items {
		rb.items[i] = backend.Item{Name: fmt.Sprint("renew-", i), Token: fmt.Sprintf("%032x", i*7919+1), TTL: floorTTLRenew}
	}
	for name, src := range renewProtos {
		sha, err := c.ScriptLoad(ctx, src).Result()
		if err != nil {
			return nil, fmt.Errorf("loading %s: %w", name, err)
		}
		rb.shas[name] = sha
	}
	return rb, nil
}

// measure renews every lease with variant v, round after round, for d
// (after one round to warm the scripts and the pool), and returns Redis
// CPU µs per renewal.
func (rb *renewBench) measure(ctx context.Context, v string, d time.Duration) (float64, error) {
	if err := rb.round(ctx, v, 0); err != nil {
		return 0, err
	}
	c0, t0 := redisCPU(ctx, rb.admin), time.Now()
	renewals := 0
	for r := 1; time.Since(t0) < d; r++ {
		if err := rb.round(ctx, v, r); err != nil {
			return 0, err
		}
		renewals += len(rb.items)
	}
	return (redisCPU(ctx, rb.admin) - c0) * 1e6 / float64(renewals), nil
}

// round renews every lease once with variant v; in round r lease i gets a
// full renewal when (i+r)%3 == 0.
func (rb *renewBench) round(ctx context.Context, v string, r int) error {
	for i := range rb.items {
		rb.items[i].Light = v == "tenure-all-light" || (i+r)%3 != 0
	}
	const perTrip = 1000
	for s := 0; s < len(rb.items); s += perTrip {
		batch := rb.items[s:min(len(rb.items), s+perTrip)]
		var err error
		switch v {
		case "tenure", "tenure-all-light":
			err = rb.renew(ctx, rb.batched, batch)
		case "tenure-per-item":
			err = rb.renew(ctx, rb.perItem, batch)
		default:
			err = rb.proto(ctx, rb.shas[v], batch)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (rb *renewBench) renew(ctx context.Context, be *backend.Redis, batch []backend.Item) error {
	errs := make([]error, len(batch))
	be.Renew(ctx, batch, errs)
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("%s: %w", batch[i].Name, err)
		}
	}
	return nil
}

// proto sends batch through a prototype script, 256 leases a call, laid out
// as renew_leases.lua's (the counters of the full renewals after the keys).
func (rb *renewBench) proto(ctx context.Context, sha string, batch []backend.Item) error {
	p := rb.c.Pipeline()
	for s := 0; s < len(batch); s += 256 {
		part := batch[s:min(len(batch), s+256)]
		ks := make([]string, 0, len(part)+len(part)/2)
		args := []any{floorTTLRenew.Milliseconds(), len(part)}
		for _, it := range part {
			ks = append(ks, rb.layout.Lease(it.Name))
			args = append(args, it.Token)
		}
		for i, it := range part {
			if !it.Light {
				ks = append(ks, rb.layout.Fence(it.Name))
				args = append(args, i+1)
			}
		}
		p.EvalSha(ctx, sha, ks, args...)
	}
	_, err := p.Exec(ctx)
	return err
}

func renewFloorReport(vs []renewVariant, us [][]float64, n, reps int, d time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Scenario 11: what a batched renewal costs Redis, step by step\n\nGenerated by `go run . -renew-floor` on %s UTC. Machine: %s; Go %s; Redis %s; load average %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04"), machine(), runtime.Version(), redisVersion(), loadAvg())
	fmt.Fprintf(&b, "%d leases on one server, each renewed round after round, a third of them fully (the fencing counter too) and the rest lightly each round, as the watchdog does at its default interval; %v a measurement, %d runs in a rotating order. Redis CPU is INFO cpu over the rounds ÷ renewals, and the ratio is taken within each run against tenure-per-item's (median, range).\n\n", n, d, reps)
	b.WriteString("| variant | what it runs | Redis CPU µs/renewal (median) | ÷ tenure-per-item (range) |\n|---|---|---:|---:|\n")
	for i, v := range vs {
		med, lo, hi := ratioSummary(us[i], us[0])
		fmt.Fprintf(&b, "| %s | %s | %.2f | %.2f× (%.2f–%.2f) |\n", v.name, v.note, median(us[i]), med, lo, hi)
	}
	return b.String()
}
