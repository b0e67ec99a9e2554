package main

// "tenure release --force": the name taken from whoever holds it, by one
// script on every node, and what it revoked or removed; and the script with
// which a revoked holder confirms that its work is dead.

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/lease"
)

// forceRelease revokes a name's lock whatever holds it (a marker with the
// holder's TTL takes its place: release_force.lua), or with --now deletes
// it, and tells its holders and waiters, atomically; it returns what it
// revoked or removed. A semaphore's permits
// (a sorted set of tokens) take their fences' hash, KEYS[3], with them;
// the tokens come back for their holder identities, which alone are shown.
// The message goes as the library's scripts send theirs (publish(), from
// backend.PublishLua): sharded on a Cluster, where a classic one would
// cost every node.
var forceRelease = releaseScripts{
	classic: backend.NewScript(backend.PublishLua(false) + forceReleaseSrc),
	sharded: backend.NewScript(backend.PublishLua(true) + forceReleaseSrc),
}

// forceReleaseSrc is the script's body, which publish() is prepended to.
//
//go:embed scripts/release_force.lua
var forceReleaseSrc string

// releaseRevoked is the script with which a revoked holder (a "tenure run"
// or "tenure elect" whose lease release --force revoked) confirms that its
// work is dead: it takes the holder's token out of the revocation marker,
// and the last one out frees the name and tells the waiters.
var releaseRevoked = releaseScripts{
	classic: backend.NewScript(backend.PublishLua(false) + releaseRevokedSrc),
	sharded: backend.NewScript(backend.PublishLua(true) + releaseRevokedSrc),
}

// releaseRevokedSrc is the script's body, which publish() is prepended to.
//
//go:embed scripts/release_revoked.lua
var releaseRevokedSrc string

// releaseScripts is a script built for each kind of release message.
type releaseScripts struct{ classic, sharded *backend.Script }

// Run runs the script c's deployment takes (backend.Sharded).
func (s releaseScripts) Run(ctx context.Context, c redis.UniversalClient, keys []string, args ...any) *redis.Cmd {
	if backend.Sharded(c) {
		return s.sharded.Run(ctx, c, keys, args...)
	}
	return s.classic.Run(ctx, c, keys, args...)
}

// releaseLong is release's help.
const releaseLong = `Revoke the lease, reentrant lock or permits (a semaphore's, or a read-write
lock's readers: every permit at once) on NAME, whoever holds them, and publish
on the name's release channel. It prints what it revoked.

A revocation keeps the promise that nothing runs under NAME beside another
holder's work: the holder's value is replaced by a revocation marker that
keeps the holder's remaining TTL, so NAME stays held for everyone else until
the holder has confirmed that its work is dead, or until that TTL runs out.
A "tenure run" or "tenure elect" holder listens on the release channel while
it holds NAME and checks its lease at once (an early renewal), finds it
revoked, stops its command (SIGTERM, then SIGKILL by the old deadline, as
for any loss), waits for the command's process group to be gone, then
confirms, which frees NAME, and exits 77. A program that holds NAME through
the library learns of the loss at its next renewal (every TTL/3) and stops,
but cannot confirm: NAME is free when the old TTL runs out. "tenure status"
shows a revoked name as kind "revoked" with the time left. Permits of several
holders are freed once each "tenure run" among them has confirmed, or at the
TTL; a reentrant lock's owners never confirm (no tenure command holds one),
so it is freed at its TTL. Running release --force again on a revoked name
changes nothing.

With --redisson, NAME is a Redisson lock (RLock, RFencedLock, RFairLock or
RReadWriteLock): each holder's field <client id>:<thread id> in its hash is
replaced by a revocation field, "tenure-revoked:" and the holder's field,
which keeps the hash and its TTL, so that Java and Go lockers still find it
held; '0' is published on its channel (redisson_lock__channel:{NAME}). A
"tenure run --redisson" holder hears it, finds its field gone, stops its
command, waits for its group to be gone, then deletes the hash and publishes
'0', which lets the waiters in. A Java or library holder never confirms: the
hash expires with its TTL. "tenure status --redisson" shows it revoked, with
the time left.

With --now, NAME is deleted at once instead, as release --force did before
revocations (as Java's forceUnlock does, with --redisson): waiters take it at
once, while the old holder's command may still run (a command that ignores
SIGTERM runs until SIGKILL just before the old deadline, up to a TTL). tenure
warns of that on stderr. --now also frees a revoked name at once.

A key without a TTL, and a key of a Redis type tenure did not write, are
deleted: there is no holder's TTL to wait out (with --redisson, a key that is
not a hash is left alone, and the exit status is 1). The fencing counter is
kept, so the next holder's fence is still larger than every earlier one.

--force is required: this breaks the holder's hold on purpose.

` + operatorExitStatuses

func newReleaseCmd(g *globals) *cobra.Command {
	var force, now, rsn bool
	cmd := &cobra.Command{
		Use:   "release --force [--now] [--redisson] NAME",
		Short: "Take NAME from whoever holds it (operators only)",
		Long:  releaseLong,
		Example: `  tenure release --force nightly-report

  # free at once; the old command may still run
  tenure release --force --now nightly-report

  # a Redisson lock, revoked in a form Java clients respect
  tenure release --force --redisson orders`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeFirstName,
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !force {
				return fail(exitUsage, "release takes %q from whoever holds it: say --force", name)
			}
			if err := checkName(name); err != nil {
				return fail(exitUsage, "%v", err)
			}
			if rsn {
				return g.releaseRedisson(cmd.OutOrStdout(), name, now)
			}
			return g.release(cmd.OutOrStdout(), name, now)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "really take the name from its holder")
	cmd.Flags().BoolVar(&now, "now", false, "delete NAME at once instead of revoking it: the holder's command may still run beside the next holder's")
	addRedissonFlag(cmd, &rsn, "NAME is a Redisson lock (its hash, as Java's Redisson keeps it): revoke its holders' fields")
	return cmd
}

// release is "tenure release --force [--now] NAME" for tenure's names.
func (g *globals) release(out io.Writer, name string, now bool) error {
	ctx := context.Background()
	client, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	l := keys.Layout{Prefix: g.prefix}
	k := l.Lease(name)
	res, err := g.forceRelease(ctx, client, []string{k, l.Fence(name), l.Permits(name)}, l.Channel(name), now)
	if err != nil {
		return g.redisFailure(fmt.Sprintf("releasing %q (the release --force script)", name), err)
	}
	switch t, _ := res[0].(string); {
	case t == "none":
		fmt.Fprintf(out, "%q was not held; nothing removed\n", name)
		return nil
	case len(res) == 3:
		ttl, _ := res[1].(int64)
		fmt.Fprintf(out, "%q is already revoked (%s left): it is freed once its holder confirms that its work is dead, "+
			"or at that TTL; --now frees it at once\n", name, time.Duration(ttl)*time.Millisecond)
		return nil
	}
	if err := printRemoved(out, name, k, res); err != nil {
		return err
	}
	if done, _ := res[4].(string); done == "deleted" && now {
		if ttl, _ := res[1].(int64); ttl > 0 {
			fmt.Fprintf(g.stderr, "tenure: --now: %q is free at once, but its holder's work may still run for up to %v "+
				"(its TTL) beside the next holder's: without --now the name would stay barred until the holder "+
				"confirmed its work dead\n", name, time.Duration(ttl)*time.Millisecond)
		}
	}
	return nil
}

// printRemoved prints what release --force revoked or removed: res is
// release_force.lua's reply of five.
func printRemoved(out io.Writer, name, key string, res []any) error {
	t, _ := res[0].(string)
	ttl, _ := res[1].(int64)
	fence, _ := res[2].(string)
	left := "no TTL"
	if ttl >= 0 {
		left = (time.Duration(ttl) * time.Millisecond).String() + " left"
	}
	removed, notified := "removed", "waiters notified"
	if done, _ := res[4].(string); done == "revoked" {
		removed = "revoked"
		notified = fmt.Sprintf("the name stays barred until its holder confirms that its work is dead, or for %v at most (its TTL)",
			time.Duration(ttl)*time.Millisecond)
	}
	switch t {
	case "revoked":
		fmt.Fprintf(out, "removed the revocation of %q (%s, fence %s, %s); waiters notified\n", name, key, fence, left)
		return nil
	case "string":
		// The value is the holder's token: only the holder identity that
		// follows it is shown.
		value, _ := res[3].([]any)
		who := "a holder that stored no identity"
		if len(value) == 1 {
			if h := lease.HolderOf(fmt.Sprint(value[0])); h != "" {
				who = shown(h)
			}
		}
		fmt.Fprintf(out, "%s the lease on %q (%s, fence %s, %s) held by %s; %s\n", removed, name, key, fence, left, who, notified)
	case "hash":
		pairs, _ := res[3].([]any)
		var owners []string
		for i := 0; i+1 < len(pairs); i += 2 {
			owners = append(owners, fmt.Sprintf("%v×%v", pairs[i], pairs[i+1]))
		}
		fmt.Fprintf(out, "%s the reentrant lock on %q (%s, fence %s, %s) held by %s; %s\n",
			removed, name, key, fence, left, strings.Join(owners, ", "), notified)
	case "zset":
		tokens, _ := res[3].([]any)
		var who []string
		for _, t := range tokens {
			s, _ := t.(string)
			if h := lease.HolderOf(s); h != "" {
				who = append(who, shown(h))
			} else {
				who = append(who, "?")
			}
		}
		what := fmt.Sprintf("the %d permits", len(tokens))
		if len(tokens) == 1 {
			what = "the permit"
		}
		fmt.Fprintf(out, "%s %s of %q (%s and its :permits, fence %s, %s) held by %s; %s\n",
			removed, what, name, key, fence, left, strings.Join(who, ", "), notified)
	default:
		fmt.Fprintf(out, "removed a %s at %s (%s), which tenure did not write; waiters notified\n", t, key, left)
	}
	return nil
}

// forceRelease runs the release --force script: in quorum mode on every
// node, returning the result of the node that removed the most recent
// holder (the largest fence) and warning on stderr of each node that
// failed; it fails unless a majority answered.
func (g *globals) forceRelease(ctx context.Context, cs *conns, keys []string, channel string, now bool) ([]any, error) {
	mode := "revoke"
	if now {
		mode = "now"
	}
	if !cs.quorum() {
		return forceRelease.Run(ctx, cs.one(), keys, channel, mode, revokedPrefix).Slice()
	}
	res := make([][]any, len(cs.nodes))
	errs := cs.each(ctx, func(ctx context.Context, i int, c redis.UniversalClient) error {
		r, err := forceRelease.Run(ctx, c, keys, channel, mode, revokedPrefix).Slice()
		res[i] = r
		return err
	})
	if err := cs.enough(errs); err != nil {
		return nil, err
	}
	var best []any
	var bestFence int64 = -1
	for i, r := range res {
		if errs[i] != nil {
			fmt.Fprintf(g.stderr, "tenure: %s: %v; what it holds expires by its TTL, and a majority no longer holds it\n",
				cs.nodes[i].where, oneLine(errs[i].Error()))
			continue
		}
		if t, _ := r[0].(string); t == "none" || len(r) == 3 {
			if best == nil || len(best) < len(r) {
				best = r
			}
			continue
		}
		fs, _ := r[2].(string)
		if f, _ := strconv.ParseInt(fs, 10, 64); f > bestFence {
			best, bestFence = r, f
		}
	}
	return best, nil
}

// revokedPrefix starts a revocation marker (internal/keys).
const revokedPrefix = keys.RevokedPrefix

// confirmRevoked tells Redis that the holder of token on name, whose lease
// was lost, has nothing running any more: it takes the token out of the
// revocation marker release --force left, if any, which frees the name
// when it was the last (release_revoked.lua), on every node in quorum
// mode. It reports whether a marker held the token on any node. Errors are
// ignored: a marker nobody confirms expires by its TTL.
func confirmRevoked(ctx context.Context, cs *conns, prefix, name, token string) bool {
	l := keys.Layout{Prefix: prefix}
	var mu sync.Mutex
	found := false
	cs.each(ctx, func(ctx context.Context, _ int, c redis.UniversalClient) error {
		n, err := releaseRevoked.Run(ctx, c, []string{l.Lease(name)}, l.Channel(name), token, revokedPrefix).Int()
		if err == nil && n > 0 {
			mu.Lock()
			found = true
			mu.Unlock()
		}
		return err
	})
	return found
}
