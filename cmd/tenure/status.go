package main

// "tenure status": what holds NAME, once (--json, --check) or as it changes
// (--watch, watch.go).

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/internal/keys"
)

// statusOptions are status's flags.
type statusOptions struct {
	asJSON   bool
	watch    bool
	check    bool
	interval durationFlag
	permits  int
}

// exitFree is "status --check"'s status for a free name.
const exitFree = 1

const statusLong = `Show what holds NAME: a lease or a reentrant lock, the TTL it has left, the
name's fencing token, a reentrant lock's owners and counts, the waiters in its
fair queue ("waiting"), and the elected leader when the holder is one. A lease's
token is never shown. The exit status is 0 whether NAME is held or free.

"waiting" counts what waits in the name's fair queue: every "tenure run" that
waits for NAME, exclusive or -n N, and the library's fair waiters
(lease.WithFair). Shared runs (--shared) waiting behind a writer do not queue
(readers never do), nor do the library's barging waiters (its default): the
server knows nothing of them, and they are not counted.

With --check, status prints nothing and answers by its exit status alone, for
scripts ("if tenure status --check NAME; then ..."): 0 when NAME is held (by
anything: a lease, a lock, permits, a leader), 1 when it is free; with -n N, 0
when none of N permits is free (a "tenure run -n N" would wait), 1 when one
is. Errors keep their own statuses (2, 69, 78): status never exits 1 for an
error.

Permits ("tenure run -n", package semaphore) show as kind "permits (semaphore or
read lock)": the readers of a read-write lock (package rwlock, "tenure run
--shared") are permits too, and the server holds nothing that tells the two
apart; a read-write lock's writer shows as a lease. Each live permit is shown
with its fence, the TTL it has left (its expiry less the server's TIME) and its
holder identity; a permit taken without one shows as "no holder identity" (or
"?" in list). While permits are held, the semaphore's N (the first holder's, or
the latest --resize) is stored with them and shown as "n" ("unlimited" for a
read lock's readers; --json gives the number stored, 1073741824); status says
how many are held, and with -n N also how many of N are free.

A name that "tenure release --force" revoked shows as kind "revoked", with
what was revoked, who has yet to confirm that its work is dead, and the TTL
left: nobody can take it until the last holder confirms, or that TTL runs out
(--json: "revoked", "unconfirmed"). status --check counts it as held.

With --watch, tenure prints the holder of each NAME at once, then one line for
every change of holder (a new fence, a lock's owners, a leader record, free),
each starting with its time, until SIGINT or SIGTERM ends it with status 0.
It reads the names every --interval: acquisitions publish nothing to wait
for, so a holder that comes and goes between two reads is not seen. With
--json each line is a JSON object (the fields of "status --json" and "time").
When Redis fails, tenure says so on stderr once and keeps reading; when it
refuses the user, tenure exits (status 78).

` + operatorExitStatuses + `
  1 (--check)           NAME is free (with -n N: one of N permits is free)`

func newStatusCmd(g *globals) *cobra.Command {
	o := statusOptions{interval: durationFlag(time.Second)}
	var asRedisson bool
	cmd := &cobra.Command{
		Use:   "status [flags] NAME\n  tenure status --check [-n N] NAME\n  tenure status --watch [flags] NAME...",
		Short: "Show who holds NAME: kind, TTL left, fence, holders, leader",
		Long:  statusLong,
		Example: `  tenure status nightly-report
  tenure status --json scheduler | jq -r .leader.identity
  tenure status --check backup || echo "no backup running"
  tenure status --watch --interval 200ms nightly-report backup`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: g.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if asRedisson {
				return showRedisson(cmd, g, o, args) // redisson.go
			}
			if err := o.validate(cmd, args); err != nil {
				return err
			}
			if o.watch {
				return watchStatus(g, args, time.Duration(o.interval), o.permits, o.asJSON, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			h, err := statusOf(g, args[0], o.permits)
			if err != nil {
				return err
			}
			if h.Kind == "free" {
				if done, err := redissonInstead(cmd, g, o, args[0]); done { // redisson_status.go
					return err
				}
			}
			switch {
			case o.check:
				return checkHeld(h, o.permits)
			case o.asJSON:
				return writeJSON(cmd.OutOrStdout(), h)
			}
			return printStatus(cmd.OutOrStdout(), h, g.prefix)
		},
	}
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print a JSON object (with --watch, one a line)")
	cmd.Flags().BoolVar(&o.watch, "watch", false, "print every change of holder of the NAMEs, with its time, until SIGINT")
	cmd.Flags().BoolVar(&o.check, "check", false, "print nothing; exit 0 if NAME is held, 1 if it is free (with -n N: 0 if no permit of N is free)")
	cmd.Flags().Var(&o.interval, "interval", "with --watch, how often to read the NAMEs")
	cmd.Flags().IntVarP(&o.permits, "permits", "n", 0, "a semaphore's number of permits N: show how many of N are free "+
		"(the N stored with held permits is shown anyway)")
	addRedissonFlag(cmd, &asRedisson, statusRedissonUsage)
	return cmd
}

// validate checks status's flags and names.
func (o *statusOptions) validate(cmd *cobra.Command, args []string) error {
	if len(args) > 1 && !o.watch {
		return fail(exitUsage, "status shows one NAME; only --watch takes several (see '%s --help')", cmd.CommandPath())
	}
	if cmd.Flags().Changed("interval") && !o.watch {
		return fail(exitUsage, "--interval is --watch's")
	}
	if o.check && (o.watch || o.asJSON) {
		return fail(exitUsage, "--check prints nothing: it goes with neither --watch nor --json")
	}
	if cmd.Flags().Changed("permits") && o.permits < 1 {
		return fail(exitUsage, "-n %d: a semaphore has at least 1 permit", o.permits)
	}
	for _, n := range args {
		if err := checkName(n); err != nil {
			return fail(exitUsage, "%v", err)
		}
	}
	if o.watch && o.interval <= 0 {
		return fail(exitUsage, "--interval must be above 0")
	}
	return nil
}

// statusOf reads what holds name, with -n's N applied.
func statusOf(g *globals, name string, permits int) (holding, error) {
	ctx := context.Background()
	client, err := g.connect(ctx)
	if err != nil {
		return holding{}, err
	}
	defer client.Close()
	hs, err := client.inspect(ctx, g.prefix, []string{name})
	if err != nil {
		return holding{}, g.redisFailure(fmt.Sprintf("reading %q", name), err)
	}
	hs[0].setLimit(permits)
	return hs[0], nil
}

// checkHeld is "status --check": nil (status 0) when h is held (with -n,
// when none of its permits is free), exitFree otherwise.
func checkHeld(h holding, permits int) error {
	held := h.Kind != "free"
	if permits > 0 {
		held = *h.Free == 0
	}
	if held {
		return nil
	}
	return status(exitFree)
}

// printStatus prints h as status does without --json.
func printStatus(out io.Writer, h holding, prefix string) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "name\t%s\n", h.Name)
	fmt.Fprintf(tw, "key\t%s\n", keys.Layout{Prefix: prefix}.Lease(h.Name))
	fmt.Fprintf(tw, "kind\t%s\n", h.kindText())
	fmt.Fprintf(tw, "ttl\t%s\n", h.ttl())
	fmt.Fprintf(tw, "fence\t%d\n", h.Fence)
	if h.Kind == "reentrant" {
		fmt.Fprintf(tw, "owners\t%s\n", h.holders())
	}
	if h.Kind == "permits" {
		fmt.Fprintf(tw, "permits\t%s\n", h.heldText())
		if h.N > 0 {
			fmt.Fprintf(tw, "n\t%s\n", h.nText())
		}
		for _, p := range h.Permits {
			fmt.Fprintf(tw, "permit\t%s\n", p.text())
		}
	} else if h.Free != nil {
		fmt.Fprintf(tw, "permits\t%d of -n %d free\n", *h.Free, h.Limit)
	}
	if h.Holder != "" {
		fmt.Fprintf(tw, "holder\t%s\n", shown(h.Holder))
	}
	if h.Metadata != "" {
		fmt.Fprintf(tw, "metadata\t%s\n", shown(h.Metadata))
	}
	if h.Leader != nil {
		fmt.Fprintf(tw, "leader\t%s (term %d)\n", h.Leader.Identity, h.Leader.Fence)
	}
	fmt.Fprintf(tw, "waiting\t%d\n", h.Waiting)
	for _, n := range h.Nodes {
		fmt.Fprintf(tw, "node\t%s\n", n.text())
	}
	return tw.Flush()
}
