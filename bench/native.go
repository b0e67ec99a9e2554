// Scenario 13, native commands (issue 49): what a newer server's commands
// would save a renewal and a release, against tenure's scripts, on the same
// server in one run.
//
// Valkey 8.1 added SET key value IFEQ expected PX ttl, a compare-and-set
// without a script; Valkey 9.0 added DELIFEQ key value, a compare-and-
// delete; Redis 8.4 and Valkey 9.2 have DELEX key IFEQ value. This scenario
// measures, as scenario 11 does (INFO cpu over a fixed time ÷ operations,
// the variants in a rotating order, each run's ratio to tenure's in the
// same run), what each costs the server beside what tenure sends:
//
//   - renewal of N leases taken by the library's acquire.lua, a third of
//     them fully (the fencing counter too) each round, as the watchdog does:
//     tenure (the backend's Renew, renew_leases.lua) and tenure-all-light;
//     set-ifeq, a pipeline of SET … IFEQ … PX; set-ifeq+counter, the same
//     plus PEXPIRE counter … GT for the full third, which a native path
//     would still send for the fencing counter; pexpire, a bare PEXPIRE of
//     each key (no compare: a floor, not a renewal).
//   - release of leases taken by the library's acquire.lua, fresh ones for
//     every batch: tenure (the backend's Release, release.lua: compare-and-
//     delete, the release's marker and the message to waiters); delifeq;
//     delifeq+publish (the message sent beside it, unconditionally, since a
//     pipeline cannot make it depend on the delete); delex.
//
// A variant whose command the server does not have is probed once and
// reported "not on this server": never measured with something else in
// its place. Beside the figures, nativeProbes asks the server what the
// native commands answer where tenure's promises are at stake.
//
// Run it with `go run . -native` (writes native.md to -out).
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/lease"
)

// nativeVariant is one way of renewing or releasing; needs names the
// command it needs from the server, "" for what every supported server has.
type nativeVariant struct{ name, needs, note string }

func nativeRenewVariants() []nativeVariant {
	return []nativeVariant{
		{"tenure", "", "the library as the watchdog calls it: Renew, renew_leases.lua, 256 leases a call, a third of them full (the baseline)"},
		{"tenure-all-light", "", "the same, every renewal light: the counter never touched (it would expire while held)"},
		{"set-ifeq", "SET IFEQ", "pipeline of SET key token IFEQ token PX ttl: the lease key alone"},
		{"set-ifeq+counter", "SET IFEQ", "the same, plus PEXPIRE counter 2·ttl GT for the full third"},
		{"pexpire", "", "a bare PEXPIRE key ttl: no compare, a floor, not a renewal"},
	}
}

func nativeReleaseVariants() []nativeVariant {
	return []nativeVariant{
		{"tenure", "", "the library's Release: release.lua (compare-and-delete, the release's marker, PUBLISH to waiters) (the baseline)"},
		{"delifeq", "DELIFEQ", "DELIFEQ key token: no marker, no message"},
		{"delifeq+publish", "DELIFEQ", "DELIFEQ, then PUBLISH to the release channel in the same pipeline: no marker"},
		{"delex", "DELEX", "DELEX key IFEQ token: no marker, no message"},
	}
}

// nativeBatch is how many operations a pipeline (and, for release, a batch
// of fresh leases) holds: what the watchdog sends a round trip.
const nativeBatch = 1000

// nativeBench is scenario 13's server, its leases, and what the server has.
type nativeBench struct {
	c, admin *redis.Client
	layout   keys.Layout
	be       *backend.Redis
	items    []backend.Item
	// missing maps a command the server lacks to its answer to the probe.
	missing map[string]string
	fresh   int
}

func runNative(ctx context.Context, cfg runConfig, outDir string, n, reps int, d time.Duration) error {
	srv, err := startLoopbackServer()
	if err != nil {
		return err
	}
	defer srv.Stop()
	nb, err := newNativeBench(ctx, srv.Addr(), n)
	if err != nil {
		return err
	}
	defer nb.c.Close()
	defer nb.admin.Close()
	rep := nativeReport{n: n, reps: reps, d: d, missing: nb.missing,
		renew: nativeRenewVariants(), release: nativeReleaseVariants()}
	rep.server = serverVersion(nb.admin.Info(ctx, "server").Val())
	rep.infoUS = infoCost(ctx, nb.admin)
	rep.renewUS = make([][]float64, len(rep.renew))
	rep.releaseUS = make([][]float64, len(rep.release))
	for run := range reps {
		if err := nb.runPart(ctx, cfg, run, d, "renew", rep.renew, rep.renewUS, nb.measureRenew); err != nil {
			return err
		}
		if err := nb.runPart(ctx, cfg, run, d, "release", rep.release, rep.releaseUS, nb.measureRelease); err != nil {
			return err
		}
	}
	if rep.probes, err = nativeProbes(ctx, nb.c, nb.missing); err != nil {
		return err
	}
	return writeReport(outDir, "native.md", rep.markdown())
}

// runPart measures each variant the server has once, starting at variant
// run % len(vs); a variant it lacks is left without figures.
func (nb *nativeBench) runPart(ctx context.Context, cfg runConfig, run int, d time.Duration, part string, vs []nativeVariant, us [][]float64,
	measure func(context.Context, string, time.Duration) (float64, error)) error {
	for k := range vs {
		i := (k + run) % len(vs)
		if _, no := nb.missing[vs[i].needs]; no {
			continue
		}
		v, err := measure(ctx, vs[i].name, d)
		if err != nil {
			return fmt.Errorf("native %s %s: %w", part, vs[i].name, err)
		}
		us[i] = append(us[i], v)
		cfg.logf("  native run %d %-7s %-16s %5.2f µs Redis CPU/op", run, part, vs[i].name, v)
	}
	return nil
}

// newNativeBench probes the server's commands and takes n leases with the
// library's acquire.lua for the renewals.
func newNativeBench(ctx context.Context, addr string, n int) (*nativeBench, error) {
	c, _ := newClient(addr, 32)
	admin, _ := newClient(addr, 1)
	nb := &nativeBench{c: c, admin: admin, layout: keys.Layout{Prefix: lease.DefaultKeyPrefix}}
	nb.be = backend.NewRedis(c, nb.layout.Prefix)
	var err error
	if nb.missing, err = probeCommands(ctx, c); err != nil {
		return nil, err
	}
	if nb.items, err = nb.acquire(ctx, "renew-native-", n); err != nil {
		return nil, err
	}
	return nb, nil
}

// acquire takes n leases named prefix0 … with the library's acquire.lua,
// from 32 goroutines.
func (nb *nativeBench) acquire(ctx context.Context, prefix string, n int) ([]backend.Item, error) {
	items := make([]backend.Item, n)
	for i := range items {
		items[i] = backend.Item{Name: fmt.Sprint(prefix, i), Token: fmt.Sprintf("%032x", i*7919+1), TTL: floorTTLRenew}
	}
	err := parallel(n, 32, func(i int) error {
		a, err := nb.be.Acquire(ctx, backend.Request{Name: items[i].Name, Token: items[i].Token, TTL: floorTTLRenew})
		if err == nil && !a.Acquired {
			err = fmt.Errorf("%s not acquired", items[i].Name)
		}
		return err
	})
	return items, err
}

// measureRenew renews every lease with variant v, round after round, for d
// (after one round to warm the pool), and returns Redis CPU µs a renewal.
func (nb *nativeBench) measureRenew(ctx context.Context, v string, d time.Duration) (float64, error) {
	if err := nb.renewRound(ctx, v, 0); err != nil {
		return 0, err
	}
	c0, t0 := redisCPU(ctx, nb.admin), time.Now()
	renewals := 0
	for r := 1; renewals == 0 || time.Since(t0) < d; r++ {
		if err := nb.renewRound(ctx, v, r); err != nil {
			return 0, err
		}
		renewals += len(nb.items)
	}
	return (redisCPU(ctx, nb.admin) - c0) * 1e6 / float64(renewals), nil
}

// renewRound renews every lease once with variant v; in round r lease i
// gets a full renewal when (i+r)%3 == 0, as in scenario 11.
func (nb *nativeBench) renewRound(ctx context.Context, v string, r int) error {
	for i := range nb.items {
		nb.items[i].Light = v == "tenure-all-light" || (i+r)%3 != 0
	}
	for s := 0; s < len(nb.items); s += nativeBatch {
		batch := nb.items[s:min(len(nb.items), s+nativeBatch)]
		var err error
		if v == "tenure" || v == "tenure-all-light" {
			errs := make([]error, len(batch))
			nb.be.Renew(ctx, batch, errs)
			err = firstItemError(batch, errs)
		} else {
			err = nb.renewNative(ctx, v, batch)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// renewNative sends one pipeline of variant v's commands for batch and
// checks that every lease was renewed: a native renewal that failed would
// measure nothing.
func (nb *nativeBench) renewNative(ctx context.Context, v string, batch []backend.Item) error {
	ms := floorTTLRenew.Milliseconds()
	p := nb.c.Pipeline()
	leases := make([]redis.Cmder, len(batch))
	for i, it := range batch {
		key := nb.layout.Lease(it.Name)
		switch v {
		case "pexpire":
			leases[i] = p.PExpire(ctx, key, floorTTLRenew)
		default:
			leases[i] = p.Do(ctx, "SET", key, it.Token, "IFEQ", it.Token, "PX", ms)
			if v == "set-ifeq+counter" && !it.Light {
				p.Do(ctx, "PEXPIRE", nb.layout.Fence(it.Name), 2*ms, "GT")
			}
		}
	}
	if _, err := p.Exec(ctx); err != nil {
		return err
	}
	for i, cmd := range leases {
		if !renewedReply(cmd) {
			return fmt.Errorf("%s not renewed: %v", batch[i].Name, cmd)
		}
	}
	return nil
}

// renewedReply says whether a native renewal's reply is a success: OK for
// SET … IFEQ, true for PEXPIRE.
func renewedReply(cmd redis.Cmder) bool {
	switch c := cmd.(type) {
	case *redis.BoolCmd:
		return c.Val()
	case *redis.Cmd:
		s, err := c.Text()
		return err == nil && s == "OK"
	}
	return false
}

func firstItemError(batch []backend.Item, errs []error) error {
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("%s: %w", batch[i].Name, err)
		}
	}
	return nil
}
