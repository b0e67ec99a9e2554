package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/election"
	tenureinspect "github.com/tenure-go/tenure/inspect"
	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/lease"
)

// holding is what a name's keys say about it.
type holding struct {
	Name string `json:"name"`
	// Kind is "lease" (a read-write lock's writer is one), "reentrant" (a
	// reentrant lock), "permits" (a semaphore's, or a read-write lock's
	// readers: the server cannot tell them apart), "free", or the Redis
	// type of a key that tenure did not write.
	Kind string `json:"kind"`
	// TTLms is the lock's remaining TTL in milliseconds; -1 when it has
	// none, 0 when free.
	TTLms int64 `json:"ttl_ms"`
	// Fence is the name's fencing counter: the holder's fencing token
	// while it is held (0 if the name was never held).
	Fence int64 `json:"fence"`
	// Owners are a reentrant lock's owners and their counts.
	Owners map[string]int64 `json:"owners,omitempty"`
	// Waiting is the number of waiters in the name's fair queue.
	Waiting int64 `json:"waiting"`
	// Holder is a lease's holder identity (lease.WithHolder; tenure run
	// sets host/pid), read from the stored value; empty when it has none.
	Holder string `json:"holder,omitempty"`
	// Metadata is a lease's metadata (lease.WithMetadata, run --metadata).
	Metadata string `json:"metadata,omitempty"`
	// Leader is the elected leader, when the holder is one.
	Leader *election.Record `json:"leader,omitempty"`
	// Permits are the live permits of a semaphore (or a read lock's
	// readers), by fence; Held is how many.
	Permits []permit `json:"permits,omitempty"`
	Held    int      `json:"held,omitempty"`
	// N is the semaphore's number of permits, stored with them by the
	// request that took the first (or the latest --resize): a request with
	// another N is refused while any is held. 0 when none is held, or the
	// permits were taken by a tenure that did not store it.
	N int `json:"n,omitempty"`
	// Limit is status -n's N, when given, and Free how many of N permits
	// a request with that N could take now (waiters aside): N - Held for
	// permits, N for a free name, 0 for a name a lease or lock holds.
	Limit int  `json:"limit,omitempty"`
	Free  *int `json:"free,omitempty"`
	// Nodes are each quorum node's own view (deploy.go), in quorum mode.
	Nodes []nodeView `json:"nodes,omitempty"`
	// id tells holds apart without their tokens (inspect.Holding.ID):
	// quorum mode compares it.
	id string
}

// permit is one live permit. Its token, the holder's secret, is never
// shown: only the holder identity that follows it (lease.HolderOf).
type permit struct {
	Holder   string `json:"holder,omitempty"`
	Metadata string `json:"metadata,omitempty"`
	Fence    int64  `json:"fence"`
	// TTLms is the permit's own remaining TTL (its expiry, the set's
	// score, less the server's TIME).
	TTLms int64 `json:"ttl_ms"`
	// Count is how many permits the holder took at once
	// (semaphore.AcquireN), when more than one.
	Count int `json:"count,omitempty"`
}

// permitsKind is how status and list name the kind "permits": the server
// holds the same set for a semaphore and for a read-write lock's readers.
const permitsKind = "permits (semaphore or read lock)"

// setLimit sets Limit and Free for status -n N.
func (h *holding) setLimit(n int) {
	if n <= 0 {
		return
	}
	free := 0
	switch h.Kind {
	case "free":
		free = n
	case "permits":
		free = max(0, n-h.Held)
	}
	h.Limit, h.Free = n, &free
}

// inspect reads names in one pipelined round trip (package inspect), in
// the form status and list print. A lease's token is never shown: it is
// the holder's secret; only the holder identity that follows it is.
func inspect(ctx context.Context, c redis.UniversalClient, prefix string, names []string) ([]holding, error) {
	hs, err := tenureinspect.Read(ctx, c, prefix, names...)
	if err != nil {
		return nil, err
	}
	out := make([]holding, len(hs))
	for i, v := range hs {
		h := holding{Name: v.Name, Kind: string(v.Kind), Fence: v.Fence, Waiting: v.Waiting, Holder: v.Holder,
			Metadata: v.Metadata, Owners: v.Owners, Leader: v.Leader, N: v.N, id: v.ID()}
		if v.Kind != tenureinspect.Free {
			h.TTLms = -1
			if v.TTL >= 0 {
				h.TTLms = v.TTL.Milliseconds()
			}
		}
		for _, p := range v.Permits {
			pm := permit{Holder: p.Holder, Metadata: p.Metadata, Fence: p.Fence, TTLms: p.TTL.Milliseconds()}
			if p.Count > 1 {
				pm.Count = p.Count
			}
			h.Permits = append(h.Permits, pm)
		}
		if v.Kind == tenureinspect.Permits {
			h.Held = v.Held()
		}
		out[i] = h
	}
	return out, nil
}

// kindText is the kind as status and list print it.
func (h holding) kindText() string {
	if h.Kind == "permits" {
		return permitsKind
	}
	return h.Kind
}

// permitText is one permit, as status prints it.
func (p permit) text() string {
	who := "no holder identity"
	if p.Holder != "" {
		who = shown(p.Holder)
	}
	md := ""
	if p.Metadata != "" {
		md = ", metadata " + shown(p.Metadata)
	}
	if p.Count > 1 {
		return fmt.Sprintf("%d permits: fence %d, ttl %v, holder %s%s", p.Count, p.Fence, time.Duration(p.TTLms)*time.Millisecond, who, md)
	}
	return fmt.Sprintf("fence %d, ttl %v, holder %s%s", p.Fence, time.Duration(p.TTLms)*time.Millisecond, who, md)
}

// readLockN is the N stored with a read-write lock's readers (package
// rwlock's number of reader permits, 1<<30: no limit in practice). status
// shows it as "unlimited"; --json keeps the number.
const readLockN = 1 << 30

// nText is N as status shows it.
func (h holding) nText() string {
	if h.N == readLockN {
		return "unlimited (a read lock's readers)"
	}
	return strconv.Itoa(h.N)
}

// heldText says how many permits are held and, with status -n, how many
// are free.
func (h holding) heldText() string {
	if h.Free != nil {
		return fmt.Sprintf("%d held, %d of -n %d free", h.Held, *h.Free, h.Limit)
	}
	if h.N == readLockN {
		return fmt.Sprintf("%d held of no limit (a read lock's readers)", h.Held)
	}
	if h.N > 0 {
		return fmt.Sprintf("%d held of n=%d", h.Held, h.N)
	}
	return fmt.Sprintf("%d held (no N stored: status -n N shows how many are free)", h.Held)
}

func (h holding) ttl() string {
	switch {
	case h.Kind == "free":
		return "-"
	case h.TTLms < 0:
		return "none"
	}
	return (time.Duration(h.TTLms) * time.Millisecond).String()
}

func (h holding) holders() string {
	var parts []string
	if h.Kind == "reentrant" {
		owners := make([]string, 0, len(h.Owners))
		for o := range h.Owners {
			owners = append(owners, o)
		}
		sort.Strings(owners)
		for _, o := range owners {
			parts = append(parts, fmt.Sprintf("%s×%d", o, h.Owners[o]))
		}
	}
	if h.Kind == "permits" {
		who := make([]string, 0, len(h.Permits))
		for _, p := range h.Permits {
			w := p.Holder
			if w == "" {
				w = "?"
			}
			if p.Count > 1 {
				w = fmt.Sprintf("%s×%d", w, p.Count)
			}
			who = append(who, w)
		}
		parts = append(parts, fmt.Sprintf("%d permits: %s", h.Held, strings.Join(who, " ")))
	}
	if h.Leader != nil {
		parts = append(parts, "leader "+h.Leader.Identity)
	} else if h.Holder != "" {
		parts = append(parts, h.Holder)
	}
	if h.Waiting > 0 {
		parts = append(parts, fmt.Sprintf("%d waiting", h.Waiting))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// who says who holds the name, for messages ("NAME is held by ..."):
// the holder identity when the lease carries one.
func (h holding) who() string {
	switch h.Kind {
	case "free":
		return "nobody any more (released meanwhile)"
	case "lease":
		switch {
		case h.Leader != nil:
			return fmt.Sprintf("leader %s (term %d)", shown(h.Leader.Identity), h.Leader.Fence)
		case h.Holder != "":
			return fmt.Sprintf("%s (fence %d, ttl %s)", shown(h.Holder), h.Fence, h.ttl())
		}
		return fmt.Sprintf("another holder (fence %d, ttl %s; it stored no holder identity)", h.Fence, h.ttl())
	case "reentrant":
		return "a reentrant lock of " + h.holders()
	case "permits":
		who := make([]string, 0, len(h.Permits))
		for _, p := range h.Permits {
			who = append(who, p.text())
		}
		what := fmt.Sprintf("%d permits", h.Held)
		if h.Held == 1 {
			what = "1 permit"
		}
		return fmt.Sprintf("%s of a semaphore or read lock (%s)", what, strings.Join(who, "; "))
	}
	return fmt.Sprintf("a Redis %s that tenure did not write", h.Kind)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

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

func newListCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [flags] [PATTERN]",
		Short: "List held names matching a glob PATTERN (default *)",
		Long: `List every held name (lease, reentrant lock or permits) whose name matches
PATTERN, a Redis glob (* ? [abc]), with its kind, TTL left, fence and holders.
Kind "permits" is a semaphore's, or a read-write lock's readers (the server
cannot tell them apart; "status --help" says more): HOLDERS counts the live
permits and names their holders ("?" for a permit without an identity), and
--json gives each permit's fence and TTL. Names are
found with SCAN, never KEYS, so a large keyspace is walked without blocking
Redis; a name taken or released meanwhile may or may not be listed. A PATTERN
that Redis would misread (a [ that no ] closes, a trailing \) is a usage error.

` + operatorExitStatuses,
		Example: `  tenure list
  tenure list 'report-*'
  tenure list --json | jq -r '.[] | select(.kind == "reentrant") | .name'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pattern := "*"
			if len(args) == 1 && args[0] != "" {
				pattern = args[0]
			}
			if err := checkPattern(pattern); err != nil {
				return fail(exitUsage, "%v", err)
			}
			ctx := context.Background()
			client, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer client.Close()
			names, err := client.scanNames(ctx, g.prefix, pattern)
			if err != nil {
				return g.redisFailure("scanning", err)
			}
			hs := []holding{}
			for len(names) > 0 {
				n := min(len(names), 500)
				batch, err := client.inspect(ctx, g.prefix, names[:n])
				if err != nil {
					return g.redisFailure("reading", err)
				}
				for _, h := range batch {
					if h.Kind != "free" { // released since the scan
						hs = append(hs, h)
					}
				}
				names = names[n:]
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, hs)
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tKIND\tTTL\tFENCE\tHOLDERS")
			for _, h := range hs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", h.Name, h.Kind, h.ttl(), h.Fence, h.holders())
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

// scanNames finds the names whose lock keys exist and match pattern, sorted
// (on a Cluster, every primary's).
func scanNames(ctx context.Context, c redis.UniversalClient, prefix, pattern string) ([]string, error) {
	return tenureinspect.Names(ctx, c, prefix, pattern)
}

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

const forceReleaseSrc = `
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'none' then return {t} end
local ttl = redis.call('PTTL', KEYS[1])
local owners = {}
if t == 'hash' then owners = redis.call('HGETALL', KEYS[1]) end
if t == 'string' then owners = {redis.call('GET', KEYS[1])} end
if t == 'zset' then
  owners = redis.call('ZRANGE', KEYS[1], 0, -1)
  redis.call('DEL', KEYS[3])
end
redis.call('DEL', KEYS[1])
publish(ARGV[1])
return {t, ttl, redis.call('GET', KEYS[2]) or '0', owners}
`

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
