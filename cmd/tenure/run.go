package main

// "tenure run": its flags and help, and the runner that connects, takes
// NAME, runs COMMAND under it (or holds NAME alone, hold.go) and releases it.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/lease"
)

// runOptions are run's flags.
type runOptions struct {
	f              childFlags
	wait           waitFlag
	releaseTimeout derivedDuration
	holder         string
	permits        int
	shared         bool
	resize         bool
	heldExit       int
	metadata       string
}

func (o *runOptions) add(cmd *cobra.Command) {
	o.f.add(cmd)
	o.wait = waitFlag{forever: true}
	cmd.Flags().Var(&o.wait, "wait", `how long to wait for NAME while it is held: a duration ("10s", "1m"), 0 for one attempt, or "forever"; `+
		`given, it waits for a Redis that does not answer at the start too`)
	cmd.Flags().Var(&o.releaseTimeout, "release-timeout", "how long to wait for Redis to confirm the release after COMMAND exits "+
		"(or a hold ends); then tenure exits, the release's outcome unknown (the lease expires by its TTL); default min(TTL, 2s). "+
		"After a loss tenure waits no later than min(TTL/10, 200ms) before the lease's local deadline")
	host, _ := os.Hostname()
	cmd.Flags().StringVar(&o.holder, "holder", fmt.Sprintf("%s/%d", host, os.Getpid()),
		"who holds the lease, stored with it at no extra round trip and shown by status and list")
	cmd.Flags().IntVarP(&o.permits, "permits", "n", 0, "run under one of N permits of the semaphore NAME instead of its lease: "+
		"at most N commands at once (N >= 1)")
	cmd.Flags().BoolVarP(&o.shared, "shared", "s", false, "take a read lock of NAME (package rwlock), as flock -s: shared runs "+
		"run together, and exclude every exclusive run of NAME")
	cmd.Flags().IntVar(&o.heldExit, "held-exit", exitTimeout, "the exit status when NAME stays held: --wait ran out, "+
		"or its one attempt (--wait 0) failed (1-255)")
	cmd.Flags().StringVar(&o.metadata, "metadata", "", "what this run is (a job id, a URL to its logs): stored with the lease or permit "+
		"and shown by status; up to 256 bytes of printable text without braces (lease.WithMetadata)")
	cmd.Flags().BoolVar(&o.resize, "resize", false, "with -n N: make N the semaphore's number of permits while its permits are held under another "+
		"(without it, such a run fails with status 76)")
}

// check validates the flags, and returns the release timeout to use.
func (o *runOptions) check(cmd *cobra.Command) (time.Duration, error) {
	if err := o.f.check(); err != nil {
		return 0, err
	}
	if err := checkExitFlag("held-exit", o.heldExit); err != nil {
		return 0, err
	}
	if o.heldExit == o.f.lostExit {
		return 0, fail(exitUsage, "--held-exit and --lost-exit are both %d: a script could not tell a name held from a lease lost",
			o.heldExit)
	}
	if cmd.Flags().Changed("permits") && o.permits < 1 {
		return 0, fail(exitUsage, "-n %d: a semaphore has at least 1 permit", o.permits)
	}
	if err := lease.CheckMetadata(o.metadata); err != nil {
		return 0, fail(exitUsage, "--metadata: %v", err)
	}
	if o.resize && o.permits == 0 {
		return 0, fail(exitUsage, "--resize is for -n N: a lease has no N to change")
	}
	if o.shared && cmd.Flags().Changed("permits") {
		return 0, fail(exitUsage, "--shared and -n exclude each other: a read lock is a permit of a semaphore with no practical limit")
	}
	rt := releaseBound(time.Duration(o.f.ttl))
	if o.releaseTimeout.set {
		if o.releaseTimeout.d <= 0 {
			return 0, fail(exitUsage, "--release-timeout must be above 0")
		}
		rt = o.releaseTimeout.d
	}
	return rt, nil
}

const runLong = `Acquire a lease on NAME (waiting up to --wait while another holder has it), run
COMMAND with TENURE_NAME and TENURE_FENCE (the lease's fencing token) in its
environment, renew the lease while it runs, release it when it exits, and exit
with its status. While it waits, tenure says once on stderr who holds NAME.
A Redis that fails while tenure waits (a restart, a failover) is waited out
within --wait too; so is one that does not answer at the start when --wait is
given (a duration or "forever"), said once on stderr. Without --wait, or with
--wait 0, an unreachable Redis at the start is exit 69 at once, so that a
wrong address does not hang a script.

Without COMMAND ("tenure run NAME", no "--"), tenure holds NAME itself, as
"etcdctl lock NAME" does: once acquired it prints one line of JSON on stdout,
{"name":…,"kind":…,"fence":…,"holder":…}, then holds NAME (renewing it) until
it gets SIGINT, SIGTERM or SIGHUP or its stdin reaches its end, releases it
and exits 0. Its stdin is read and discarded: "tenure run NAME </dev/null"
releases at once; a script keeps a hold as a coprocess (bash: coproc tenure
run NAME) and ends it by closing the pipe or with kill. A hold runs nothing,
so its exit is the only word that it ended, and whoever relies on it must
watch for that: when the lease is lost (deleted or taken over), or no renewal
has moved its local deadline by min(TTL/10, 200ms) before it, tenure says why
on stderr and exits with --lost-exit (77) at once, without waiting on Redis
(see the release below): before Redis could let another holder take NAME.

With --shared (-s), tenure takes a read lock of NAME (package rwlock) instead,
as flock -s does: any number of shared runs of NAME run at once, and none runs
while an exclusive run of NAME does. An exclusive run (without --shared or
-n) takes the read-write lock's write lock, which is the plain lease of NAME
taken through the name's fair queue: so it excludes every reader and waits in
turn, and once it waits, new shared runs wait behind it (writers first: a
stream of readers cannot starve it). A shared run is a permit (below) of a
semaphore with no practical limit; status shows it as permits.

With -n N, NAME is a semaphore of N permits (package semaphore): COMMAND runs
under one of them, so at most N commands run at once under NAME across every
host, and tenure waits while N are held. The N of the run that took the first
permit stands while any permit of NAME is held: a "tenure run -n" with another
N fails at once with status 76, naming both, rather than letting more commands
in than either meant; once no permit is held, the next run sets N anew. With
--resize the run's N replaces the stored one instead: a larger N lets more in
at once; a smaller one stops nothing that runs, and no run starts until fewer
than the new N are held. Runs that wait take the permits in the order they
asked (the name's fair queue, where status counts them as waiting). A permit
is a lease in every other respect:
everything below (renewals, the stop before its local deadline, the loss,
--holder, the exit statuses) holds for it as for a lease, and TENURE_FENCE is
the permit's fence. A lease and permits of one NAME exclude each other.

COMMAND runs in a process group of its own. Signals sent to tenure (INT, TERM,
HUP, QUIT, USR1, USR2) are passed to that group. On Linux, when tenure is in
the foreground of its terminal, it makes COMMAND's group the terminal's
foreground, as a shell does for a job: COMMAND can read the terminal, and
Ctrl-C there reaches COMMAND's group directly. tenure takes the terminal back
when COMMAND exits. Elsewhere COMMAND cannot read from the terminal.

Nothing of the group runs past the lease. Renewals every TTL/3 keep moving the
lease's local deadline (TTL − TTL/100 − 2ms after a renewal is sent, before
the key can expire on Redis); COMMAND's process group gets SIGTERM --grace
before that deadline and SIGKILL min(TTL/10, 200ms) before it. While renewals
succeed neither comes due. When the lease is lost (deleted or taken over) the
group gets SIGTERM at once, SIGKILL still just before the deadline. Either way
tenure then exits with status 77 (--lost-exit). --grace defaults to
min(10s, TTL/3) and may be at most 7·TTL/12 − TTL/100 − 2ms (the deadline
stays 2·TTL/3 − drift ahead between renewals; the rest is headroom for a late
renewal): 17.198s for the default 30s TTL. A lease lost, or a SIGTERM come
due, before COMMAND starts keeps it from starting: tenure checks just before
it starts COMMAND, and on Linux the guard (below) checks the deadline again
just before it does; tenure then exits 77 too.

When COMMAND exits, whatever it left running in its group is killed (SIGKILL)
before the lease is released; if the release finds that another holder took
NAME over meanwhile, tenure exits with status 77, not COMMAND's status.
tenure waits --release-timeout for Redis to confirm the release, default
min(TTL, 2s): a release is one round trip, milliseconds on a reachable server,
and past the TTL the lease has expired on Redis anyway. When no reply comes in
time (Redis unreachable, slow or paused) tenure says so and exits: whether the
release took effect is then unknown, and if it did not, the lease expires by
its TTL. After a loss, or a stop for want of a renewal, the release is only a
courtesy (the lease is no longer held, or expires at its deadline), and exit
status 77 is what tells a script that the work under NAME ended: so tenure
waits for it no later than min(TTL/10, 200ms) before the lease's local
deadline, and exits by then, before Redis could let another holder in.

A loss is always reported on stderr with its reason: the lease's key was
deleted (or expired on the server), another holder took it over, or Redis did
not confirm a renewal in time, with the last error of the renewals (connection
refused, i/o timeout, READONLY, ...). --holder names who holds it (default
host/pid): it is stored with the lease, and status, list, a waiting run and
"NAME is held" messages show it. -v logs the acquisition, failed renewals, the
release and the loss; -vv every renewal too.

On Linux, COMMAND runs under a small guard process (tenure itself) that leads
its group. tenure tells the guard the lease's local deadline after every
renewal, and the guard stops the group by the last deadline it was told, on
the same timing (SIGTERM --grace before it, SIGKILL min(TTL/10, 200ms) before
it), whatever becomes of tenure: running, stopped (SIGSTOP), starved of CPU
or dead. When tenure dies in any way, SIGKILL and the OOM killer included, the
guard kills the group at once; when COMMAND exits, it kills what COMMAND left
in the group. On other systems there is no guard: if tenure is killed or
stopped, COMMAND and its group keep running while the lease expires. A
process that leaves the group (setsid, a daemon) escapes tenure everywhere.

Job control. A stopped tenure cannot renew its lease, so tenure does not stop:
SIGTSTP (Ctrl-Z) sent to it is ignored, with a line on stderr. On Linux tenure
also watches COMMAND itself (not its children). COMMAND stopped by SIGTSTP
(Ctrl-Z at the terminal reaches COMMAND's group) is continued at once
(SIGCONT), with a line on stderr. COMMAND stopped in any other way (SIGSTOP,
or SIGTTIN/SIGTTOU for using the terminal from the background) is reported on
stderr; if it is not continued within --ttl, tenure kills its group (SIGKILL),
releases the lease and exits with status 137: a stopped command keeps NAME no
longer than a dead holder would.

With --redisson, NAME is Redisson's RLock NAME instead (the hash a Java
service's redisson.getLock(NAME) takes; --fenced: its RFencedLock, and
TENURE_FENCE is the lock's token), so that the command and the Java services
exclude each other. The key is NAME itself, without --prefix. The command gets
TENURE_REDISSON_FIELD, the lock's owner field (<client id>:<thread id>) as
Java's Redisson and "tenure status --redisson NAME" show it. --ttl is the
lock's watchdog timeout: it may not exceed --java-watchdog, the Java services'
lockWatchdogTimeout (30s by default, as Redisson's). --wait, -v, the stops
before the local deadline and the exit statuses are as above; -n, --shared,
--holder and --metadata are not (a Redisson lock stores only its owner field).

`

// runExample is the examples of "run --help", one of each form.
const runExample = `  # one nightly report at a time, across every host that runs this
  tenure run nightly-report ./report.sh --since yesterday

  # give up after 10s if another host is at it; a short TTL frees NAME soon
  # if we die
  tenure run --wait 10s --ttl 5s backup -- pg_dump -f /backups/db.sql

  # pass the fencing token on to the resource you write to
  tenure run migrate -- sh -c 'migrate --fence "$TENURE_FENCE"'

  # at most 3 builds at once across the fleet
  tenure run -n 3 builders -- make release

  # from now on at most 5, while the others still run
  tenure run -n 5 --resize builders -- make release

  # readers together, the writer alone (flock -s and flock)
  tenure run --shared catalog -- ./read-catalog.sh
  tenure run catalog -- ./rebuild-catalog.sh

  # hold a name while a script does several things; the hold ends with it
  coproc HOLD { tenure run deploy; }
  read -r acquired <&"${HOLD[0]}"; echo "$acquired"    # {"name":"deploy",...}
  ./step1 && ./step2
  exec {HOLD[1]}>&-; wait "$HOLD_PID"

  # tell tenure's own statuses from the command's
  tenure run --held-exit 200 --lost-exit 201 --wait 0 job -- ./job.sh

  # exclude a Java service's redisson.getLock("orders") (its lockWatchdogTimeout
  # is 60s); the command gets its Redisson owner field
  tenure run --redisson --java-watchdog 60s --ttl 60s --wait 30s orders -- \
    sh -c './settle-orders --owner "$TENURE_REDISSON_FIELD"'`

func newRunCmd(g *globals) *cobra.Command {
	var o runOptions
	var rf redissonRunFlags
	cmd := &cobra.Command{
		Use: "run [flags] NAME [--] COMMAND [ARGS...]\n  tenure run -n N [flags] NAME [--] COMMAND [ARGS...]\n" +
			"  tenure run --shared [flags] NAME [--] COMMAND [ARGS...]\n  tenure run [flags] NAME",
		Short:             "Run a command while holding NAME (a lease, permit or read lock), or hold NAME",
		Long:              runLong + commandRule("run") + "\n\n" + runExitStatuses,
		Example:           runExample,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: g.completeFirstName,
		RunE: func(cmd *cobra.Command, args []string) error {
			inv, err := parseInvocation(cmd, args, g)
			if err != nil {
				return err
			}
			rt, err := o.check(cmd)
			if err != nil {
				return err
			}
			r := &runner{g: g, o: o, name: inv.name, argv: inv.argv, releaseTimeout: rt, stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(),
				waitGiven: cmd.Flags().Changed("wait")}
			return rf.dispatch(cmd, r) // redisson.go
		},
	}
	o.add(cmd)
	rf.add(cmd)
	// COMMAND's flags are its own: tenure's stop at NAME.
	cmd.Flags().SetInterspersed(false)
	return cmd
}

// runner is one "tenure run": it acquires NAME, runs argv under it (or
// holds NAME without a command, when argv is empty) and releases it.
type runner struct {
	g              *globals
	o              runOptions
	name           string
	argv           []string
	releaseTimeout time.Duration
	stdout, stderr io.Writer
	// waitGiven: --wait was given, so that an unreachable Redis is
	// waited for too (connect).
	waitGiven bool

	sigs *sigRouter
	w    *leaseWatch
	how  acquirer
	// whoHolds reads what holds NAME, in one read of its keys (kind ""
	// when the read failed).
	whoHolds func(ctx context.Context) holding
	// unwatch stops watchReleases, once NAME is acquired.
	unwatch func()
	// client is the connection to Redis, for confirmRevoked.
	client *conns
}

func (r *runner) run() error {
	ctx, wctx, done := r.begin()
	defer done()
	client, err := r.connect(ctx, wctx)
	if err != nil {
		return err
	}
	defer client.Close()
	r.client = client
	ttl := time.Duration(r.o.f.ttl)
	r.w = newLeaseWatch(r.g.log, ttl)
	r.w.permit = r.o.permits > 0 || r.o.shared
	r.w.probe = client.ping
	// The library's own logger stays silent: the hooks log the same events
	// (a loss with its reason) for -v, and tenure reports a loss anyway.
	m, err := client.newManager(lease.WithKeyPrefix(r.g.prefix), lease.WithTTL(ttl), lease.WithHolder(r.o.holder),
		lease.WithLogger(slog.New(slog.DiscardHandler)), lease.WithHooks(r.w.hooks()))
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	defer m.Close()
	var opts []lease.AcquireOption
	if r.o.metadata != "" {
		opts = append(opts, lease.WithMetadata(r.o.metadata))
	}
	r.how = newAcquirer(m, r.name, r.o.permits, r.o.resize, r.o.shared, client.quorum(), opts)
	r.whoHolds = func(ctx context.Context) holding {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		hs, err := client.inspect(ctx, r.g.prefix, []string{r.name})
		if err != nil {
			return holding{Name: r.name}
		}
		return hs[0]
	}

	l, err := r.acquire(ctx, wctx)
	if err != nil {
		return err
	}
	// release --force is noticed at once, not at the next renewal; the
	// listening ends before tenure's own release.
	r.unwatch = watchReleases(client, r.g.prefix, l, ttl, r.g.log)
	defer r.unwatch()
	if len(r.argv) == 0 {
		return r.hold(ctx, l)
	}
	return r.runCommand(l)
}

// runCommand runs argv under l, releases l, and returns tenure's exit.
func (r *runner) runCommand(l *lease.Lease) error {
	env := append(childEnv(), "TENURE_NAME="+r.name, "TENURE_FENCE="+strconv.FormatInt(l.Fence(), 10))
	describe := func(cause error) string { return fmt.Sprintf("%s was lost: %s", r.how.held, r.w.why(l, cause)) }
	h := hold{l.Context(), l.Deadline, r.w.renewals(), describe, r.w.renewErrorOf(l)}
	code, lost, dead, err := supervise(r.argv, env, r.sigs, h, r.o.f.timing(), r.stderr)
	if lost != nil {
		return r.commandLost(l, lost, dead)
	}
	rerr := r.release(l)
	if err != nil {
		return err
	}
	return r.afterRelease(l, rerr, fmt.Sprintf("as the command exited with status %d", code),
		fmt.Sprintf("after the command exited with status %d", code), "while the command ran", status(code))
}

// commandLost ends a run whose command was stopped, or not started, for
// the lease (cause: supervise's lost), with --lost-exit; dead is
// supervise's: the command's group was seen gone.
func (r *runner) commandLost(l *lease.Lease, cause error, dead bool) error {
	r.releaseLost(l, dead)
	return fail(r.o.f.lostExit, "%s was lost %s: %s; %s", r.how.held, lostWhen(cause), r.w.why(l, cause), lostDone(cause))
}

// connect connects to Redis. With --wait given (and not 0) a Redis that
// does not answer is waited for within wctx, the --wait's context, as it
// is once NAME is waited for; without it, tenure fails at once (exit 69),
// so that a wrong address does not hang a script that relies on the
// default --wait forever.
func (r *runner) connect(ctx, wctx context.Context) (*conns, error) {
	return r.connectAs(ctx, wctx, runFeature(r.o.permits, r.o.shared))
}

// connectAs is connect for feature (connectFor's).
func (r *runner) connectAs(ctx, wctx context.Context, feature string) (*conns, error) {
	if !r.waitGiven || (!r.o.wait.forever && r.o.wait.d == 0) {
		return r.g.connectFor(ctx, feature)
	}
	client, err := r.g.connectWaiting(wctx, feature, r.o.wait.String())
	if s, ok := r.sigs.interrupted(); ok && err != nil {
		return nil, fail(signalStatus(s), "interrupted by %s while waiting for Redis", signalName(s))
	}
	return client, err
}

// begin starts a run: ctx, which a signal cancels (r.sigs routes them),
// and wctx, ctx bounded by --wait, which bounds the whole wait: for Redis
// to answer, then for NAME. done ends both and stops the routing.
func (r *runner) begin() (ctx, wctx context.Context, done func()) {
	ctx, cancel := context.WithCancel(context.Background())
	r.sigs = newSigRouter(cancel, r.stderr)
	wctx, wcancel := ctx, context.CancelFunc(func() {})
	if !r.o.wait.forever && r.o.wait.d > 0 {
		wctx, wcancel = context.WithTimeout(ctx, r.o.wait.d)
	}
	return ctx, wctx, func() {
		wcancel()
		r.sigs.stop()
		cancel()
	}
}
