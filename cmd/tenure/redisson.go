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
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	tenureinspect "github.com/tenure-go/tenure/inspect"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/redisson"
	"github.com/tenure-go/tenure/watchdog"
)

// addRedissonFlag adds --redisson to cmd.
func addRedissonFlag(cmd *cobra.Command, on *bool, usage string) {
	cmd.Flags().BoolVar(on, "redisson", false, usage)
}

// redissonRunFlags are run's flags for --redisson.
type redissonRunFlags struct {
	on, fenced   bool
	javaWatchdog durationFlag
}

func (f *redissonRunFlags) add(cmd *cobra.Command) {
	addRedissonFlag(cmd, &f.on, runRedissonUsage)
	f.javaWatchdog = durationFlag(redisson.DefaultWatchdogTimeout)
	cmd.Flags().BoolVar(&f.fenced, "fenced", false, "with --redisson: take Redisson's RFencedLock NAME instead of its RLock; "+
		"TENURE_FENCE is the lock's token (redisson_lock_token:{NAME}), which rises with every acquisition")
	cmd.Flags().Var(&f.javaWatchdog, "java-watchdog", "with --redisson: the Java services' lockWatchdogTimeout "+
		"(Redisson's Config), which --ttl may not exceed")
}

// dispatch runs r: as runRedisson with --redisson, else as a plain run,
// which --redisson's own flags do not go with.
func (f redissonRunFlags) dispatch(cmd *cobra.Command, r *runner) error {
	if f.on {
		return r.runRedisson(cmd, f)
	}
	if f.fenced || cmd.Flags().Changed("java-watchdog") {
		return fail(exitUsage, "--fenced and --java-watchdog go with --redisson: a tenure lease has its own fence and no Java watchdog")
	}
	return r.run()
}

const runRedissonUsage = "take Redisson's RLock NAME (the hash a Java service's redisson.getLock(NAME) takes, " +
	"field <client id>:<thread id>) instead of tenure's lease: Go and Java exclude each other; " +
	"COMMAND gets the field as TENURE_REDISSON_FIELD; --ttl (the lock's watchdog timeout) may not exceed --java-watchdog"

// errNotRedissonLock: NAME's key is of a type no Redisson lock has (a
// string, a list): Redis answers the lock script with WRONGTYPE, which no
// retry mends.
var errNotRedissonLock = errors.New("not a Redisson lock")

// check validates run --redisson's flags against r's.
func (f *redissonRunFlags) check(cmd *cobra.Command, r *runner) error {
	switch {
	case len(r.argv) == 0:
		return fail(exitUsage, "--redisson runs a COMMAND: holding a Redisson lock without one is not supported")
	case r.o.permits > 0 || r.o.shared || r.o.resize:
		return fail(exitUsage, "--redisson takes an RLock: it goes with neither -n, --shared nor --resize")
	case r.o.metadata != "" || cmd.Flags().Changed("holder"):
		return fail(exitUsage, "--redisson: a Redisson lock stores no holder identity or metadata, only its owner field")
	case time.Duration(f.javaWatchdog) < redisson.MinWatchdogTimeout:
		return fail(exitUsage, "--java-watchdog %v is below %v", time.Duration(f.javaWatchdog), redisson.MinWatchdogTimeout)
	case time.Duration(r.o.f.ttl) > time.Duration(f.javaWatchdog):
		return fail(exitUsage, "--ttl %v exceeds --java-watchdog %v: package redisson keeps a Go holder's TTL within "+
			"the Java services' lockWatchdogTimeout, as their own locks are kept; give --java-watchdog their lockWatchdogTimeout "+
			"if they set a longer one, or a shorter --ttl", time.Duration(r.o.f.ttl), time.Duration(f.javaWatchdog))
	}
	return nil
}

// runRedisson is "tenure run --redisson": it takes the RLock (or, with
// --fenced, the RFencedLock) NAME, runs argv under it with the supervision
// of every run (the group stopped by the lock's local deadline, at once
// on a loss), unlocks it and exits with the command's status.
func (r *runner) runRedisson(cmd *cobra.Command, f redissonRunFlags) error {
	if err := f.check(cmd, r); err != nil {
		return err
	}
	ctx, wctx, done := r.begin()
	defer done()
	client, err := r.connectAs(ctx, wctx, "run --redisson")
	if err != nil {
		return err
	}
	defer client.Close()
	ttl := time.Duration(r.o.f.ttl)
	once := noResend(client.one())
	defer once.Close()
	rc, err := redisson.New(once, redisson.WithWatchdogTimeout(ttl),
		redisson.WithJavaWatchdogTimeout(time.Duration(f.javaWatchdog)))
	if err != nil {
		return fail(exitUsage, "--redisson: %v", err)
	}
	defer rc.Close()
	lk := rc.GetLock(r.name)
	if f.fenced {
		lk = rc.GetFencedLock(r.name)
	}
	h, err := r.takeRedisson(ctx, wctx, client.one(), lk)
	if err != nil {
		return err
	}
	env := append(childEnv(), "TENURE_NAME="+r.name, "TENURE_FENCE="+strconv.FormatInt(h.Token(), 10),
		"TENURE_REDISSON_FIELD="+h.Field())
	hd := hold{
		ctx:      h.Context(),
		deadline: h.Deadline,
		renewed:  r.redissonRenewals(h),
		describe: func(cause error) string {
			return fmt.Sprintf("Redisson lock %q was lost: %s", r.name, redissonLoss(cause))
		},
	}
	// dead (the group is confirmed gone) lets a revoked holder confirm
	// (redissonLost).
	code, lost, dead, err := supervise(r.argv, env, r.sigs, hd, r.o.f.timing(), r.stderr)
	uerr := r.unlockRedisson(h, lost)
	if lost != nil {
		return r.redissonLost(lost, dead, client.one(), h.Field())
	}
	if err != nil {
		return err
	}
	if uerr != nil {
		if errors.Is(uerr, lease.ErrNotHeld) {
			return fail(r.o.f.lostExit, "Redisson lock %q was no longer held when the command exited with status %d: %s",
				r.name, code, redissonLoss(uerr))
		}
		fmt.Fprintf(r.stderr, "tenure: the unlock of Redisson lock %q was not confirmed (%v): it expires by its TTL, %v\n",
			r.name, saidOnce(uerr, r.name), ttl)
	}
	return status(code)
}

// takeRedisson takes lk as --wait says, as acquire takes a lease: one
// attempt, then, if NAME is held and --wait allows, a wait announced once
// on stderr with who holds it, through Redis failures within --wait.
func (r *runner) takeRedisson(ctx, wctx context.Context, c redis.UniversalClient, lk *redisson.Lock) (*redisson.Hold, error) {
	start := time.Now()
	take := func(ctx context.Context, wait bool) (*redisson.Hold, error) {
		take := lk.TryLock
		if wait {
			take = lk.Lock
		}
		h, err := take(ctx)
		if err != nil && strings.Contains(err.Error(), "WRONGTYPE") {
			err = fmt.Errorf("%w: %w", errNotRedissonLock, err)
		}
		return h, err
	}
	h, err := take(wctx, false)
	if redissonHeld(err) && (r.o.wait.forever || r.o.wait.d > 0) {
		fmt.Fprintf(r.stderr, "tenure: Redisson lock %q is held by %s; waiting for it (--wait %v)\n",
			r.name, redissonHolders(ctx, c, r.name), r.o.wait.String())
		h, err = retryTake(r.g, wctx, take)
	}
	if err == nil {
		r.g.log.Info("acquired", "name", r.name, "redisson_field", h.Field(), "fence", h.Token(), "ttl", time.Duration(r.o.f.ttl),
			"waited", time.Since(start).Round(time.Millisecond))
		return h, nil
	}
	if s, ok := r.sigs.interrupted(); ok {
		return nil, fail(signalStatus(s), "interrupted by %s while waiting for Redisson lock %q", signalName(s), r.name)
	}
	if errors.Is(err, errNotRedissonLock) {
		return nil, fail(exitUsage, "%q is not a Redisson lock: its key holds a Redis %s; a Redisson lock is a hash",
			r.name, keyType(c, r.name))
	}
	if refusal(err) == "" && errors.Is(err, lease.ErrNotAcquired) && (wctx.Err() != nil || redissonHeld(err)) {
		msg := fmt.Sprintf("Redisson lock %q is held by %s", r.name, redissonHolders(context.Background(), c, r.name))
		if r.o.wait.forever || r.o.wait.d > 0 {
			msg += fmt.Sprintf("; not acquired within --wait %v", r.o.wait.String())
		}
		return nil, fail(r.o.heldExit, "%s", msg)
	}
	return nil, r.g.redisFailure(fmt.Sprintf("taking Redisson lock %q", r.name), saidOnce(err, r.name))
}

// saidOnceErr is an error whose message leaves out what the message
// around it says already; Unwrap keeps errors.Is and errors.As working.
type saidOnceErr struct {
	msg string
	err error
}

func (e *saidOnceErr) Error() string { return e.msg }
func (e *saidOnceErr) Unwrap() error { return e.err }

// saidOnce is err without the prefixes by which package redisson names
// the lock name again ("lease: not acquired: "NAME": ", "redisson: unlock
// "NAME": "), for a message that names it already.
func saidOnce(err error, name string) error {
	msg := err.Error()
	for _, p := range []string{lease.ErrNotAcquired.Error(), lease.ErrNotHeld.Error(), lease.ErrLost.Error(), "redisson: unlock", "redisson:"} {
		msg = strings.TrimPrefix(msg, fmt.Sprintf("%s %q: ", p, name))
		msg = strings.TrimPrefix(msg, fmt.Sprintf("%s: %q: ", p, name))
	}
	return &saidOnceErr{msg: msg, err: err}
}

// redissonHeld reports whether err is an attempt that found the lock
// held. Package redisson wraps lease.ErrNotAcquired around a Redis error
// or refusal of an attempt too, and has no error of its own for "held":
// its message is what tells them apart.
func redissonHeld(err error) bool {
	return errors.Is(err, lease.ErrNotAcquired) && strings.Contains(err.Error(), "is held by another owner")
}

// keyType is name's Redis type, for a message ("a value of another type"
// when the read fails).
func keyType(c redis.UniversalClient, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	t, err := c.Type(ctx, name).Result()
	if err != nil {
		return "value of another type"
	}
	return t
}

// redissonRenewals passes h's renewals on to supervise, logging each for
// -vv, until h ends; a loss is logged for -v, as a lease's is.
func (r *runner) redissonRenewals(h *redisson.Hold) <-chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		for {
			select {
			case <-h.Done():
				if err := h.Err(); errors.Is(err, lease.ErrLost) {
					r.g.log.Warn("lock lost", "name", r.name, "redisson_field", h.Field(), "why", redissonLoss(err))
				}
				return
			case <-h.Renewals():
				r.g.log.Debug("renewed", "name", r.name, "redisson_field", h.Field(),
					"deadline_in", time.Until(h.Deadline()).Round(time.Millisecond))
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out
}

// unlockRedisson unlocks h once its command is done, bounded by
// --release-timeout, and after a loss (lost) by the local deadline too:
// tenure's exit must come before anyone else could be let in.
func (r *runner) unlockRedisson(h *redisson.Hold, lost error) error {
	bound := r.releaseTimeout
	if lost != nil {
		bound = min(bound, time.Until(h.Deadline()))
	}
	uctx, ucancel := context.WithTimeout(context.Background(), max(bound, 0))
	defer ucancel()
	err := h.Unlock(uctx)
	switch {
	case err == nil:
		r.g.log.Info("released", "name", r.name, "redisson_field", h.Field())
	case lost == nil:
		r.g.log.Warn("release failed", "name", r.name, "redisson_field", h.Field(), "error", err)
	}
	return err
}

// redissonLoss says why a Redisson hold ended, each fact once: the
// library's chain names the lock at every layer it passes.
func redissonLoss(cause error) string {
	switch {
	case errors.Is(cause, redisson.ErrForceUnlocked):
		return "it was force-unlocked: a message on its channel (a Java forceUnlock, or tenure release --force --redisson) made it look, and its owner field was gone"
	case errors.Is(cause, watchdog.ErrNotHeld), strings.Contains(cause.Error(), "field is gone"),
		strings.Contains(cause.Error(), "field was gone"):
		return "its owner field is gone from the hash (deleted, expired on the server, or a Java forceUnlock)"
	case errors.Is(cause, watchdog.ErrExpired):
		return "Redis did not confirm a renewal before the lock's local deadline (unreachable, slow or paused)"
	}
	return oneLine(bare(cause))
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
	// FreePermits and Permits: an RPermitExpirableSemaphore's, in list
	// --redisson (Kind "redisson-semaphore"), as status --redisson gives
	// them.
	FreePermits *int64           `json:"free_permits,omitempty"`
	Permits     []redissonPermit `json:"permits,omitempty"`
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
	if h.Kind == "string" {
		return showSemaphore(cmd, g, o, client, args[0]) // redisson_status.go
	}
	s := lockStatus(h)
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

// lockStatus is what status and list --redisson say of a Redisson lock
// read by inspect.
func lockStatus(h tenureinspect.Holding) redissonStatus {
	s := redissonStatus{Name: h.Name, Kind: string(h.Kind), TTLms: ttlMs(h.TTL), Token: h.Fence, Owners: h.Owners, Waiting: h.Waiting}
	s.revokedOf()
	return s
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
