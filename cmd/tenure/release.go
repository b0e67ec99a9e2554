package main

// "tenure release --force": the name taken from whoever holds it, by one
// script on every node, and what it removed.

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/lease"
)

// forceRelease deletes a name's lock whatever holds it and tells its
// waiters, atomically; it returns what it removed. A semaphore's permits
// (a sorted set of tokens) take their fences' hash, KEYS[3], with them;
// the tokens come back for their holder identities, which alone are shown.
// The message goes as the library's scripts send theirs (publish(), from
// backend.PublishLua): sharded on a Cluster, where a classic one would
// cost every node.
var forceRelease = releaseScripts{
	classic: redis.NewScript(backend.PublishLua(false) + forceReleaseSrc),
	sharded: redis.NewScript(backend.PublishLua(true) + forceReleaseSrc),
}

// forceReleaseSrc is the script's body, which publish() is prepended to.
//
//go:embed scripts/release_force.lua
var forceReleaseSrc string

// releaseScripts is a script built for each kind of release message.
type releaseScripts struct{ classic, sharded *redis.Script }

// Run runs the script c's deployment takes (backend.Sharded).
func (s releaseScripts) Run(ctx context.Context, c redis.UniversalClient, keys []string, args ...any) *redis.Cmd {
	if backend.Sharded(c) {
		return s.sharded.Run(ctx, c, keys, args...)
	}
	return s.classic.Run(ctx, c, keys, args...)
}

func newReleaseCmd(g *globals) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "release --force NAME",
		Short: "Take NAME from whoever holds it (operators only)",
		Long: `Delete the lease, reentrant lock or permits (a semaphore's, or a read-write
lock's readers: every permit at once) on NAME, whoever holds them, and publish
on the name's release channel so that waiters take it at once. It prints what
it removed. A "tenure run" or "tenure elect" holder listens on that channel
while it holds NAME and checks its lease at once (an early renewal): it stops
its command, or its hold, and exits 77 within a round trip. A program that
holds NAME through the library learns of the loss at its next renewal (every
TTL/3), and stops. The fencing counter is kept, so the next holder's fence is
still larger than every earlier one.

--force is required: this breaks the holder's mutual exclusion on purpose.

` + operatorExitStatuses,
		Example:           `  tenure release --force nightly-report`,
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
			ctx := context.Background()
			client, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer client.Close()
			l := keys.Layout{Prefix: g.prefix}
			k := l.Lease(name)
			res, err := g.forceRelease(ctx, client, []string{k, l.Fence(name), l.Permits(name)}, l.Channel(name))
			if err != nil {
				return g.redisFailure(fmt.Sprintf("releasing %q (the release --force script)", name), err)
			}
			out := cmd.OutOrStdout()
			if t, _ := res[0].(string); t == "none" {
				fmt.Fprintf(out, "%q was not held; nothing removed\n", name)
				return nil
			}
			return printRemoved(out, name, k, res)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "really take the name from its holder")
	return cmd
}

func printRemoved(out io.Writer, name, key string, res []any) error {
	t, _ := res[0].(string)
	ttl, _ := res[1].(int64)
	fence, _ := res[2].(string)
	left := "no TTL"
	if ttl >= 0 {
		left = (time.Duration(ttl) * time.Millisecond).String() + " left"
	}
	switch t {
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
		fmt.Fprintf(out, "removed the lease on %q (%s, fence %s, %s) held by %s; waiters notified\n", name, key, fence, left, who)
	case "hash":
		pairs, _ := res[3].([]any)
		var owners []string
		for i := 0; i+1 < len(pairs); i += 2 {
			owners = append(owners, fmt.Sprintf("%v×%v", pairs[i], pairs[i+1]))
		}
		fmt.Fprintf(out, "removed the reentrant lock on %q (%s, fence %s, %s) held by %s; waiters notified\n",
			name, key, fence, left, strings.Join(owners, ", "))
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
		fmt.Fprintf(out, "removed %s of %q (%s and its :permits, fence %s, %s) held by %s; waiters notified\n",
			what, name, key, fence, left, strings.Join(who, ", "))
	default:
		fmt.Fprintf(out, "removed a %s at %s (%s), which tenure did not write; waiters notified\n", t, key, left)
	}
	return nil
}

// forceRelease runs the release --force script: in quorum mode on every
// node, returning the result of the node that removed the most recent
// holder (the largest fence) and warning on stderr of each node that
// failed; it fails unless a majority answered.
func (g *globals) forceRelease(ctx context.Context, cs *conns, keys []string, channel string) ([]any, error) {
	if !cs.quorum() {
		return forceRelease.Run(ctx, cs.one(), keys, channel).Slice()
	}
	res := make([][]any, len(cs.nodes))
	errs := cs.each(ctx, func(ctx context.Context, i int, c redis.UniversalClient) error {
		r, err := forceRelease.Run(ctx, c, keys, channel).Slice()
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
		if t, _ := r[0].(string); t == "none" {
			if best == nil {
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
