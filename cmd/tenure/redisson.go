package main

// --redisson: "tenure run --redisson NAME -- COMMAND" runs COMMAND under
// Redisson's RLock NAME (package redisson), the lock a Java service takes
// with redisson.getLock(NAME); "tenure status --redisson NAME" shows who
// holds it. NAME is the name as Redisson stores it: a NameMapper's prefix
// is part of it ("app1:orders"). Kept in this file, apart from run's and
// status's own, so that --redisson touches their code at one line each.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	tenureinspect "github.com/tenure-go/tenure/inspect"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/redisson"
)

// addRedissonFlag adds --redisson to cmd.
func addRedissonFlag(cmd *cobra.Command, on *bool, usage string) {
	cmd.Flags().BoolVar(on, "redisson", false, usage)
}

const runRedissonUsage = "take Redisson's RLock NAME (the hash a Java service's redisson.getLock(NAME) takes, " +
	"field <client id>:<thread id>) instead of tenure's lease: Go and Java exclude each other; " +
	"--ttl must not exceed the Java services' lockWatchdogTimeout (30s by default)"

// runRedisson is "tenure run --redisson": it takes the RLock NAME, runs
// argv under it with the supervision of every run (the group stopped by
// the lock's local deadline, at once on a loss), unlocks it and exits with
// the command's status.
func (r *runner) runRedisson(cmd *cobra.Command) error {
	switch {
	case len(r.argv) == 0:
		return fail(exitUsage, "--redisson runs a COMMAND: holding a Redisson lock without one is not supported")
	case r.o.permits > 0 || r.o.shared || r.o.resize:
		return fail(exitUsage, "--redisson takes an RLock: it goes with neither -n, --shared nor --resize")
	case r.o.metadata != "" || cmd.Flags().Changed("holder"):
		return fail(exitUsage, "--redisson: a Redisson lock stores no holder identity or metadata, only its owner field")
	}
	ctx, wctx, done := r.begin()
	defer done()
	client, err := r.g.connectFor(ctx, "run --redisson")
	if err != nil {
		return err
	}
	defer client.Close()
	ttl := time.Duration(r.o.f.ttl)
	once := noResend(client.one())
	defer once.Close()
	rc, err := redisson.New(once, redisson.WithWatchdogTimeout(ttl))
	if err != nil {
		return fail(exitUsage, "--redisson: %v", err)
	}
	defer rc.Close()
	lk := rc.GetLock(r.name)
	var h *redisson.Hold
	if !r.o.wait.forever && r.o.wait.d == 0 {
		h, err = lk.TryLock(wctx)
	} else {
		h, err = lk.Lock(wctx)
	}
	if err != nil {
		if s, ok := r.sigs.interrupted(); ok {
			return fail(signalStatus(s), "interrupted by %s while waiting for Redisson lock %q", signalName(s), r.name)
		}
		if errors.Is(err, lease.ErrNotAcquired) && (wctx.Err() != nil || strings.Contains(err.Error(), "held by another")) {
			return fail(r.o.heldExit, "Redisson lock %q is held by another owner (%s)", r.name, redissonHolders(ctx, client.one(), r.name))
		}
		return r.g.redisFailure(fmt.Sprintf("taking Redisson lock %q", r.name), err)
	}
	env := append(childEnv(), "TENURE_NAME="+r.name, "TENURE_FENCE=0", "TENURE_REDISSON_FIELD="+h.Field())
	hd := hold{
		ctx:      h.Context(),
		deadline: h.Deadline,
		renewed:  h.Renewals(),
		describe: func(cause error) string {
			return fmt.Sprintf("Redisson lock %q was lost: %s", r.name, oneLine(bare(cause)))
		},
	}
	// dead (the group is confirmed gone) lets a revoked holder confirm
	// (redissonLost).
	code, lost, dead, err := supervise(r.argv, env, r.sigs, hd, r.o.f.timing(), r.stderr)
	// The unlock is bounded by --release-timeout, and after a loss by the
	// local deadline too: tenure's exit must come before anyone else could
	// be let in.
	bound := r.releaseTimeout
	if lost != nil {
		bound = min(bound, time.Until(h.Deadline()))
	}
	uctx, ucancel := context.WithTimeout(context.Background(), max(bound, 0))
	uerr := h.Unlock(uctx)
	ucancel()
	if lost != nil {
		return r.redissonLost(lost, dead, client.one(), h.Field())
	}
	if err != nil {
		return err
	}
	if uerr != nil {
		if errors.Is(uerr, lease.ErrNotHeld) {
			return fail(r.o.f.lostExit, "Redisson lock %q was no longer held when the command exited with status %d: %v", r.name, code, uerr)
		}
		fmt.Fprintf(r.stderr, "tenure: the unlock of Redisson lock %q was not confirmed (%v): it expires by its TTL, %v\n", r.name, uerr, ttl)
	}
	return status(code)
}

// noResend returns a client of c's servers that does not resend a
// command whose reply was lost (MaxRetries -1), as redisson.New requires:
// a lock script run twice would count its entry twice. tenure's other
// clients retry once (target.client), which its own scripts allow.
func noResend(c redis.UniversalClient) redis.UniversalClient {
	switch c := c.(type) {
	case *redis.ClusterClient:
		o := *c.Options()
		o.MaxRetries = -1
		return redis.NewClusterClient(&o)
	case *redis.Client:
		// A Sentinel group's client too: its options carry the dialer
		// that asks the sentinels for the primary.
		o := *c.Options()
		o.MaxRetries = -1
		return redis.NewClient(&o)
	}
	return c
}

// redissonHolders says who holds a Redisson lock, from one read.
func redissonHolders(ctx context.Context, c redis.UniversalClient, name string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	hs, err := tenureinspect.ReadRedisson(ctx, c, "", name)
	if err != nil || len(hs[0].Owners) == 0 {
		return "owner unknown"
	}
	return ownersText(hs[0].Owners)
}

// ownersText is "field (count), ..." sorted by field.
func ownersText(owners map[string]int64) string {
	fields := make([]string, 0, len(owners))
	for f := range owners {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = fmt.Sprintf("%s (%d)", f, owners[f])
	}
	return strings.Join(parts, ", ")
}

// redissonStatus is what "tenure status --redisson --json" prints.
type redissonStatus struct {
	Name string `json:"name"`
	// Kind is "redisson-lock" (an RLock or RFencedLock), "redisson-read"
	// or "redisson-write" (an RReadWriteLock), "free", or the Redis type
	// of a key no Redisson lock wrote.
	Kind   string           `json:"kind"`
	TTLms  int64            `json:"ttl_ms"`
	Token  int64            `json:"token"`
	Owners map[string]int64 `json:"owners,omitempty"`
	// Revoked are the holders' fields and counts that release --force
	// --redisson revoked: the hash stays held until each has confirmed
	// that its work is dead, or until its TTL runs out.
	Revoked map[string]int64 `json:"revoked,omitempty"`
	// Waiting is the length of the RFairLock queue
	// redisson_lock_queue:{NAME}: waiters, those whose timeout passed
	// included until an attempt drops them; 0 for other kinds.
	Waiting int64 `json:"waiting"`
}

const statusRedissonUsage = "NAME is Redisson's lock NAME (RLock, RFencedLock, RFairLock or RReadWriteLock, as a Java service's Redisson holds it): " +
	"show its kind, owner fields <client id>:<thread id> with their counts, TTL, RFencedLock token and RFairLock waiters"

// showRedisson is "tenure status --redisson NAME".
func showRedisson(cmd *cobra.Command, g *globals, o statusOptions, args []string) error {
	if o.watch || cmd.Flags().Changed("permits") || len(args) != 1 {
		return fail(exitUsage, "--redisson shows one NAME, without --watch or -n")
	}
	if err := checkName(args[0]); err != nil {
		return fail(exitUsage, "%v", err)
	}
	ctx := context.Background()
	client, err := g.connectFor(ctx, "status --redisson")
	if err != nil {
		return err
	}
	defer client.Close()
	hs, err := tenureinspect.ReadRedisson(ctx, client.one(), "", args[0])
	if err != nil {
		return g.redisFailure(fmt.Sprintf("reading Redisson lock %q", args[0]), err)
	}
	h := hs[0]
	s := redissonStatus{Name: h.Name, Kind: string(h.Kind), TTLms: h.TTL.Milliseconds(), Token: h.Fence, Owners: h.Owners, Waiting: h.Waiting}
	if h.TTL < 0 {
		s.TTLms = -1
	}
	s.revokedOf()
	switch {
	case o.check:
		if h.Kind == tenureinspect.Free {
			return status(exitFree)
		}
		return nil
	case o.asJSON:
		return writeJSON(cmd.OutOrStdout(), s)
	}
	return printRedisson(cmd.OutOrStdout(), s)
}

func printRedisson(out io.Writer, s redissonStatus) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "name\t%s\n", s.Name)
	fmt.Fprintf(tw, "key\t%s\n", s.Name)
	fmt.Fprintf(tw, "kind\t%s\n", s.Kind)
	switch {
	case s.TTLms > 0:
		fmt.Fprintf(tw, "ttl\t%v\n", time.Duration(s.TTLms)*time.Millisecond)
	case s.TTLms < 0:
		fmt.Fprintf(tw, "ttl\tnone\n")
	default:
		fmt.Fprintf(tw, "ttl\t-\n")
	}
	fmt.Fprintf(tw, "token\t%d\n", s.Token)
	if len(s.Owners) > 0 {
		fmt.Fprintf(tw, "owners\t%s\n", ownersText(s.Owners))
	}
	if len(s.Revoked) > 0 {
		fmt.Fprintf(tw, "revoked\t%s: held until it confirms that its work is dead, or %v at most (its TTL)\n",
			ownersText(s.Revoked), time.Duration(max(s.TTLms, 0))*time.Millisecond)
	}
	if s.Waiting > 0 {
		fmt.Fprintf(tw, "waiting\t%d (RFairLock queue)\n", s.Waiting)
	}
	return tw.Flush()
}
