package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
)

// nativeProbe is what the server answered tenure's path and a native one
// where one of tenure's promises is at stake.
type nativeProbe struct {
	promise, asked, tenure, native string
	// kept: the native answer keeps the promise (each probe says by what
	// test of the answer).
	kept bool
}

// nativeProbes asks the server, on names of their own, what the native
// commands it has answer where docs/design.md promises something: the
// answers are the server's, not this file's opinion of them.
func nativeProbes(ctx context.Context, c *redis.Client, missing map[string]string) ([]nativeProbe, error) {
	pb := &prober{c: c, be: backend.NewRedis(c, "native-probe:")}
	var out []nativeProbe
	if _, no := missing["SET IFEQ"]; !no {
		out = append(out, pb.staleRenewal(ctx), pb.lostCauses(ctx), pb.otherType(ctx))
	}
	for _, del := range []string{"DELIFEQ", "DELEX"} {
		if _, no := missing[del]; !no {
			out = append(out, pb.resentRelease(ctx, del), pb.waiters(ctx, del))
		}
	}
	return out, pb.err
}

type prober struct {
	c   *redis.Client
	be  *backend.Redis
	n   int
	err error
}

// held takes a fresh name with the library's acquire.lua at ttl and
// returns its item and key.
func (pb *prober) held(ctx context.Context, ttl time.Duration) (backend.Item, string) {
	pb.n++
	it := backend.Item{Name: fmt.Sprint("p", pb.n), Token: fmt.Sprintf("tok%d", pb.n), TTL: ttl}
	a, err := pb.be.Acquire(ctx, backend.Request{Name: it.Name, Token: it.Token, TTL: ttl})
	if err == nil && !a.Acquired {
		err = fmt.Errorf("probe %s not acquired", it.Name)
	}
	if pb.err == nil {
		pb.err = err
	}
	return it, "native-probe:{" + it.Name + "}"
}

func (pb *prober) renew(ctx context.Context, it backend.Item) error {
	errs := make([]error, 1)
	pb.be.Renew(ctx, []backend.Item{it}, errs)
	return errs[0]
}

func (pb *prober) release(ctx context.Context, it backend.Item) error {
	errs := make([]error, 1)
	pb.be.Release(ctx, []backend.Item{it}, errs)
	return errs[0]
}

// setIfeq is the native renewal of it with ttl.
func (pb *prober) setIfeq(ctx context.Context, key, token string, ttl time.Duration) string {
	return reply(pb.c.Do(ctx, "SET", key, token, "IFEQ", token, "PX", ttl.Milliseconds()))
}

// staleRenewal: a lease extended to 60s, then a renewal at its old TTL
// that was sent before the Extend and runs after it (S8).
func (pb *prober) staleRenewal(ctx context.Context) nativeProbe {
	pttl := func(key string) time.Duration {
		return pb.c.PTTL(ctx, key).Val().Round(time.Second)
	}
	a, ka := pb.held(ctx, 10*time.Second)
	b, kb := pb.held(ctx, 10*time.Second)
	for _, it := range []backend.Item{a, b} {
		it.TTL = time.Minute
		_ = pb.renew(ctx, it)
	}
	_ = pb.renew(ctx, a)
	pb.setIfeq(ctx, kb, b.Token, b.TTL)
	left := pttl(kb)
	return nativeProbe{"S8: a renewal never shortens a lease",
		"key's TTL after Extend(60s), then a stale renewal at 10s",
		fmt.Sprint("PTTL ", pttl(ka)), fmt.Sprint("PTTL ", left), left >= 59*time.Second}
}

// lostCauses: a renewal of a name that expired and of one another holder
// took (S4 tells the two apart: ErrGone, ErrNotHeld).
func (pb *prober) lostCauses(ctx context.Context) nativeProbe {
	a, ka := pb.held(ctx, time.Minute)
	b, kb := pb.held(ctx, time.Minute)
	pb.c.Del(ctx, ka)
	pb.c.Set(ctx, kb, "another-token", time.Minute)
	gone, taken := pb.setIfeq(ctx, ka, a.Token, time.Minute), pb.setIfeq(ctx, kb, b.Token, time.Minute)
	return nativeProbe{"S4: a lost lease's cause (expired or taken)",
		"renewal of a name gone; of a name another token holds",
		errText(pb.renew(ctx, a)) + "; " + errText(pb.renew(ctx, b)),
		gone + "; " + taken, gone != taken}
}

// otherType: a renewal of a name whose key is a hash (S3: "not this
// holder", never an error).
func (pb *prober) otherType(ctx context.Context) nativeProbe {
	a, ka := pb.held(ctx, time.Minute)
	pb.c.Del(ctx, ka)
	pb.c.HSet(ctx, ka, a.Token, 1)
	native := pb.setIfeq(ctx, ka, a.Token, time.Minute)
	return nativeProbe{"S3: a key of another type is \"not this holder\"",
		"renewal of a name whose key is a hash",
		errText(pb.renew(ctx, a)), native, !strings.HasPrefix(native, "error ")}
}

// resentRelease: the same release sent twice, as go-redis resends one
// whose reply was lost (S3: answered as the first was).
func (pb *prober) resentRelease(ctx context.Context, del string) nativeProbe {
	a, _ := pb.held(ctx, time.Minute)
	b, kb := pb.held(ctx, time.Minute)
	first := pb.release(ctx, a)
	again := pb.release(ctx, a)
	n1, n2 := reply(pb.del(ctx, del, kb, b.Token)), reply(pb.del(ctx, del, kb, b.Token))
	return nativeProbe{"S3: a resent release is answered as the first was",
		del + ": a release, then the same release again",
		errText(first) + ", then " + errText(again), n1 + ", then " + n2, n1 == n2}
}

func (pb *prober) del(ctx context.Context, del, key, token string) *redis.Cmd {
	if del == "DELEX" {
		return pb.c.Do(ctx, "DELEX", key, "IFEQ", token)
	}
	return pb.c.Do(ctx, "DELIFEQ", key, token)
}

// waiters: whether a subscriber of the name's release channel hears of the
// release (section 5: waiters are woken by it).
func (pb *prober) waiters(ctx context.Context, del string) nativeProbe {
	heard := func(name string, release func()) string {
		sub := pb.c.Subscribe(ctx, "native-probe:{"+name+"}:released")
		defer sub.Close()
		if _, err := sub.Receive(ctx); err != nil {
			return errText(err)
		}
		release()
		wait, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := sub.ReceiveMessage(wait); err != nil {
			return "no message within 1s"
		}
		return "a message"
	}
	a, _ := pb.held(ctx, time.Minute)
	b, kb := pb.held(ctx, time.Minute)
	native := heard(b.Name, func() { pb.del(ctx, del, kb, b.Token) })
	return nativeProbe{"section 5: a release wakes the waiters",
		del + ": what a subscriber of the release channel hears",
		heard(a.Name, func() { _ = pb.release(ctx, a) }), native, native == "a message"}
}

// reply is a command's answer as redis-cli would show it.
func reply(cmd *redis.Cmd) string {
	v, err := cmd.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "(nil)"
	case err != nil:
		return "error " + err.Error()
	}
	return fmt.Sprint(v)
}

func errText(err error) string {
	if err == nil {
		return "success"
	}
	return err.Error()
}

// nativeReport is scenario 13's figures and probes.
type nativeReport struct {
	n, reps            int
	d                  time.Duration
	server             string
	infoUS             float64
	missing            map[string]string
	renew, release     []nativeVariant
	renewUS, releaseUS [][]float64
	probes             []nativeProbe
}

func (r nativeReport) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Scenario 13: native commands against tenure's scripts\n\nServer: **%s**. Generated by `go run . -native` on %s UTC. Machine: %s; Go %s; load average %s.\n\n",
		r.server, time.Now().UTC().Format("2006-01-02 15:04"), machine(), runtime.Version(), loadAvg())
	fmt.Fprintf(&b, "Redis CPU (INFO cpu) ÷ operations; %v a measurement, %d runs with the variants in a rotating order; the ratio is taken within each run against tenure's (median, range over the runs).\n\n", r.d, r.reps)
	fmt.Fprintf(&b, "## Renewal\n\n%d leases taken by the library's acquire.lua, each renewed round after round, a third of them fully (the fencing counter too) each round, %d to a pipeline.\n\n", r.n, nativeBatch)
	r.table(&b, r.renew, r.renewUS)
	fmt.Fprintf(&b, "\n## Release\n\nBatches of %d fresh leases taken by the library's acquire.lua (not measured), then released in one pipeline; nobody subscribes to the release channels. Each batch's reading includes one INFO cpu read, %.1f µs here (%.3f µs a release), alike for every variant.\n\n", nativeBatch, r.infoUS, r.infoUS/nativeBatch)
	r.table(&b, r.release, r.releaseUS)
	b.WriteString("\n## What the native commands answer where a promise is at stake\n\nAsked of this server after the measurements, on names of their own (docs/design.md).\n\n")
	b.WriteString("| promise | asked | tenure's scripts | native | native keeps it |\n|---|---|---|---|---|\n")
	for _, p := range r.probes {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", p.promise, p.asked, p.tenure, p.native, map[bool]string{true: "yes", false: "**no**"}[p.kept])
	}
	if len(r.probes) == 0 {
		b.WriteString("| – | this server has none of the native commands | | | |\n")
	}
	b.WriteString("\nbench/README.md (scenario 13) says what each \"no\" would cost and whether a native path is worth it.\n")
	return b.String()
}

func (r nativeReport) table(b *strings.Builder, vs []nativeVariant, us [][]float64) {
	b.WriteString("| variant | what it sends | server CPU µs/op (median) | ÷ tenure (range) |\n|---|---|---:|---:|\n")
	for i, v := range vs {
		if why, no := r.missing[v.needs]; no {
			fmt.Fprintf(b, "| %s | %s | not on this server | (%s answered `%s`) |\n", v.name, v.note, v.needs, strings.TrimSpace(why))
			continue
		}
		med, lo, hi := ratioSummary(us[i], us[0])
		fmt.Fprintf(b, "| %s | %s | %.2f | %.2f× (%.2f–%.2f) |\n", v.name, v.note, median(us[i]), med, lo, hi)
	}
}
