package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/rwlock"
	"github.com/tenure-go/tenure/semaphore"
)

// forwarded are the signals passed on to the command's process group.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// childFlags are the flags of the subcommands that run a command.
type childFlags struct {
	ttl      durationFlag
	grace    derivedDuration
	lostExit int
}

func (f *childFlags) add(cmd *cobra.Command) {
	f.ttl = durationFlag(lease.DefaultTTL)
	cmd.Flags().Var(&f.ttl, "ttl", "the lease's TTL: renewed every TTL/3; a holder that dies frees NAME within it")
	cmd.Flags().Var(&f.grace, "grace", "how long before the lease's local deadline COMMAND gets SIGTERM (SIGKILL follows just before the deadline); "+
		"default min(10s, TTL/3), at most 7·TTL/12 − TTL/100 − 2ms")
	cmd.Flags().IntVar(&f.lostExit, "lost-exit", exitLost, "the exit status when the lease (or leadership) is lost, "+
		"or found lost at the release (1-255)")
}

func (f *childFlags) check() error {
	ttl := time.Duration(f.ttl)
	if ttl < lease.MinTTL {
		return fail(exitUsage, "--ttl %v is below the minimum %v", ttl, lease.MinTTL)
	}
	if err := checkExitFlag("lost-exit", f.lostExit); err != nil {
		return err
	}
	if f.grace.set && f.grace.d > maxGrace(ttl) {
		return fail(exitUsage, "--grace %v does not fit --ttl %v: COMMAND gets SIGTERM --grace before the lease's local deadline, "+
			"which renewals keep only TTL − TTL/3 − drift ahead, so a longer grace would signal COMMAND while the lease is healthy; "+
			"the largest --grace for --ttl %v is %v", f.grace.d, ttl, ttl, maxGrace(ttl))
	}
	return nil
}

// timing returns when, relative to the local deadline, COMMAND is signalled.
func (f *childFlags) timing() stopTiming {
	ttl := time.Duration(f.ttl)
	t := stopTiming{grace: defaultGrace(ttl), killMargin: killMargin(ttl), stoppedFor: ttl}
	if f.grace.set {
		t.grace = f.grace.d
	}
	return t
}

// derivedDuration is a duration flag whose default depends on --ttl
// (--grace, --release-timeout): remembered as set or not.
type derivedDuration struct {
	d   time.Duration
	set bool
}

// String is empty while unset, so that --help shows the usage's
// TTL-dependent default and not a misleading constant.
func (f *derivedDuration) String() string {
	if !f.set {
		return ""
	}
	return f.d.String()
}
func (f *derivedDuration) Type() string { return "duration" }
func (f *derivedDuration) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	f.d, f.set = d, true
	return nil
}

// The timing of a command's stop. The lease renews every TTL/3 (lease's
// default, which the CLI does not change) and its local deadline is the
// renewal's send time + TTL − drift, drift = TTL/100 + 2ms (lease's
// defaults). So while renewals succeed, the deadline is between
// TTL − TTL/3 − drift and TTL − drift ahead, and a SIGTERM sent at
// (deadline − grace) must not come due in that state.

// maxDefaultGrace is the default --grace for long TTLs, as before the
// default came to depend on the TTL.
const maxDefaultGrace = 10 * time.Second

func renewInterval(ttl time.Duration) time.Duration { return ttl / 3 }

func drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*lease.DefaultDriftFactor) + lease.DefaultDriftExtra
}

// maxGrace is the longest --grace for ttl: TTL − renew interval − drift −
// renew interval/4 = 7·TTL/12 − TTL/100 − 2ms. The last quarter interval
// is headroom for a renewal's round trip and a busy scheduler: a renewal
// whose reply is up to TTL/12 late does not get COMMAND signalled.
func maxGrace(ttl time.Duration) time.Duration {
	ri := renewInterval(ttl)
	return ttl - ri - drift(ttl) - ri/4
}

// defaultGrace is min(10s, TTL/3): 10s, as before, for the default 30s TTL,
// and below maxGrace for every TTL from lease.MinTTL up (TTL/3 ≤
// 7·TTL/12 − TTL/100 − 2ms holds from TTL ≈ 8.4ms).
func defaultGrace(ttl time.Duration) time.Duration { return min(maxDefaultGrace, ttl/3) }

// killMargin is how long before the local deadline SIGKILL is sent:
// min(TTL/10, 200ms). The drift already separates the local deadline from
// the key's expiry on the server; this margin is for tenure's own timer to
// fire late on a loaded machine and the signal to land, so that the group
// is dead by the deadline itself. It stays small next to the default
// grace (TTL/3) for short TTLs, and is capped because for long ones only a
// late timer needs it.
func killMargin(ttl time.Duration) time.Duration { return min(ttl/10, 200*time.Millisecond) }

// stopTiming says when a command is stopped: SIGTERM grace before the
// lease's local deadline (or at once when the lease is lost), SIGKILL
// killMargin before it; and SIGKILL when it has stayed stopped (SIGSTOP,
// SIGTTIN, SIGTTOU) for stoppedFor, the TTL: as long as a dead holder
// keeps the name.
type stopTiming struct {
	grace, killMargin time.Duration
	stoppedFor        time.Duration
}

// at returns when, for the local deadline dl, SIGTERM and SIGKILL come
// due; never SIGTERM after SIGKILL.
func (t stopTiming) at(dl time.Time) (termAt, killAt time.Time) {
	killAt = dl.Add(-t.killMargin)
	termAt = dl.Add(-t.grace)
	if killAt.Before(termAt) {
		termAt = killAt
	}
	return termAt, killAt
}

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

// checkExitFlag validates an exit status flag: 1 to 255.
func checkExitFlag(flag string, code int) error {
	if code < 1 || code > 255 {
		return fail(exitUsage, "--%s %d: an exit status is 1 to 255 (0 is success)", flag, code)
	}
	return nil
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

`

func newRunCmd(g *globals) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use: "run [flags] NAME [--] COMMAND [ARGS...]\n  tenure run -n N [flags] NAME [--] COMMAND [ARGS...]\n" +
			"  tenure run --shared [flags] NAME [--] COMMAND [ARGS...]\n  tenure run [flags] NAME",
		Short: "Run a command while holding NAME (a lease, a permit, a read lock), or hold it alone",
		Long:  runLong + commandRule("run") + "\n\n" + runExitStatuses,
		Example: `  # one nightly report at a time, across every host that runs this
  tenure run nightly-report ./report.sh --since yesterday

  # give up after 10s if another host is at it; a short TTL frees NAME fast if we die
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

  # hold a name while a script does several things; the hold ends with the script
  coproc HOLD { tenure run deploy; }
  read -r acquired <&"${HOLD[0]}"; echo "$acquired"    # {"name":"deploy",...}
  ./step1 && ./step2
  exec {HOLD[1]}>&-; wait "$HOLD_PID"

  # tell tenure's own statuses from the command's
  tenure run --held-exit 200 --lost-exit 201 --wait 0 job -- ./job.sh`,
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
			return r.run()
		},
	}
	o.add(cmd)
	// COMMAND's flags are its own: tenure's stop at NAME.
	cmd.Flags().SetInterspersed(false)
	return cmd
}

// maxReleaseWait is the default --release-timeout for TTLs from 2s up.
const maxReleaseWait = 2 * time.Second

// releaseBound is the default --release-timeout: min(TTL, 2s). Waiting
// longer than the TTL gains nothing, since by then the key has expired on
// Redis whether or not the release arrived; and a release is one round
// trip, which a reachable server answers in milliseconds, so 2s is ample
// for it and short enough not to hold up the script that runs tenure when
// Redis is paused or cut off.
func releaseBound(ttl time.Duration) time.Duration { return min(ttl, maxReleaseWait) }

// sigRouter receives tenure's signals: it forwards them to the command's
// process group while one runs, and otherwise cancels the wait. SIGTSTP
// (Ctrl-Z) it refuses, saying so: a stopped tenure could not renew its
// lease.
type sigRouter struct {
	ch      chan os.Signal
	mu      sync.Mutex
	pgid    int
	got     os.Signal
	cancel  context.CancelFunc
	done    chan struct{}
	refused chan struct{} // pokes the goroutine that says SIGTSTP was ignored
}

func newSigRouter(cancel context.CancelFunc, stderr io.Writer) *sigRouter {
	r := &sigRouter{ch: make(chan os.Signal, 8), cancel: cancel, done: make(chan struct{}), refused: make(chan struct{}, 1)}
	signal.Notify(r.ch, forwarded...)
	signal.Notify(r.ch, syscall.SIGTSTP)
	// A goroutine of its own: a stderr that blocks must not hold up the
	// signals that follow.
	go func() {
		for range r.refused {
			fmt.Fprintln(stderr, "tenure: SIGTSTP (Ctrl-Z) ignored: tenure does not stop, since a stopped tenure could not renew its lease")
		}
	}()
	go func() {
		defer close(r.done)
		for s := range r.ch {
			if s == syscall.SIGTSTP {
				select {
				case r.refused <- struct{}{}:
				default:
				}
				continue
			}
			r.route(s)
		}
	}()
	return r
}

// route forwards s to the command's group, or cancels the wait.
func (r *sigRouter) route(s os.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pgid > 0 {
		_ = syscall.Kill(-r.pgid, s.(syscall.Signal))
	} else if r.got == nil {
		r.got = s
		r.cancel()
	}
}

func (r *sigRouter) setChild(pgid int) {
	r.mu.Lock()
	r.pgid = pgid
	r.mu.Unlock()
}

// interrupted returns the signal that cancelled the wait, if any.
func (r *sigRouter) interrupted() (os.Signal, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got, r.got != nil
}

func (r *sigRouter) stop() {
	signal.Stop(r.ch)
	close(r.ch)
	<-r.done
	close(r.refused)
}

// signalName is s as its constant is spelt ("SIGINT"), for messages:
// os.Signal's String ("interrupt") reads oddly after "interrupted by".
func signalName(s os.Signal) string {
	if n, ok := s.(syscall.Signal); ok {
		if name := unix.SignalName(n); name != "" {
			return name
		}
	}
	return s.String()
}

// signalStatus is 128+N for signal N.
func signalStatus(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return exitError
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
	// whoHolds says who holds NAME, from one read of its keys.
	whoHolds func(ctx context.Context) string
	// unwatch stops watchReleases, once NAME is acquired.
	unwatch func()
}

// acquirer is how a run takes NAME: the write lock (the plain lease), a
// read lock (--shared), or a permit (-n): one path, only the acquisition
// and the words differ, since each is a *lease.Lease.
type acquirer struct {
	take func(ctx context.Context, wait bool) (*lease.Lease, error)
	// kind is the hold's kind, for the line a hold prints.
	kind string
	// held names what is held ("the lease on "x""), busy says that NAME
	// is held, from who holds it, and acquiring names the acquisition.
	held, acquiring string
	busy            func(who string) string
}

func newAcquirer(m *lease.Manager, name string, permits int, resize, shared, quorum bool, opts []lease.AcquireOption) acquirer {
	switch {
	case permits > 0:
		return permitAcquirer(m, name, permits, resize, opts)
	case shared:
		rw := rwlock.New(m)
		return acquirer{
			take: func(ctx context.Context, wait bool) (*lease.Lease, error) {
				if wait {
					return rw.RLock(ctx, name, opts...)
				}
				return rw.TryRLock(ctx, name, opts...)
			},
			kind:      "read lock",
			held:      fmt.Sprintf("the read lock of %q", name),
			acquiring: fmt.Sprintf("acquiring a read lock of %q (--shared)", name),
			busy: func(who string) string {
				return fmt.Sprintf("%q is held or awaited by a writer (%s)", name, who)
			},
		}
	}
	take := func(ctx context.Context, wait bool) (*lease.Lease, error) {
		if wait {
			return rwlock.New(m).Lock(ctx, name, opts...)
		}
		return rwlock.New(m).TryLock(ctx, name, opts...)
	}
	if quorum {
		// Quorum mode keeps no fair queue, which a writer waits in, and
		// no read locks: a plain lease is the write lock's key alike.
		take = func(ctx context.Context, wait bool) (*lease.Lease, error) {
			if wait {
				return m.Acquire(ctx, name, opts...)
			}
			return m.TryAcquire(ctx, name, opts...)
		}
	}
	return acquirer{
		take:      take,
		kind:      "lease",
		held:      fmt.Sprintf("the lease on %q", name),
		acquiring: fmt.Sprintf("acquiring %q", name),
		busy:      func(who string) string { return fmt.Sprintf("%q is held by %s", name, who) },
	}
}

// permitAcquirer takes one of the permits of the semaphore name (-n).
func permitAcquirer(m *lease.Manager, name string, permits int, resize bool, opts []lease.AcquireOption) acquirer {
	sem := semaphore.New(m)
	return acquirer{
		take: func(ctx context.Context, wait bool) (*lease.Lease, error) {
			o := append(opts[:len(opts):len(opts)], semaphore.WithResize(resize))
			if wait {
				// A waiting run takes its turn in the name's fair queue:
				// the runs get in in the order they asked, and status
				// counts them as waiting, which barging waiters (unknown
				// to the server) it could not.
				return sem.Acquire(ctx, name, permits, append(o, lease.WithFair(true))...)
			}
			return sem.TryAcquire(ctx, name, permits, o...)
		},
		kind:      "permit",
		held:      fmt.Sprintf("the permit of %q", name),
		acquiring: fmt.Sprintf("acquiring a permit of %q (-n %d)", name, permits),
		busy: func(string) string {
			return fmt.Sprintf("%q has all %d permits held (or a lease or lock holds it)", name, permits)
		},
	}
}

func (r *runner) run() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.sigs = newSigRouter(cancel, r.stderr)
	defer r.sigs.stop()

	// --wait bounds the whole wait: for Redis to answer, then for NAME.
	wctx := ctx
	if !r.o.wait.forever && r.o.wait.d > 0 {
		var wcancel context.CancelFunc
		wctx, wcancel = context.WithTimeout(ctx, r.o.wait.d)
		defer wcancel()
	}
	client, err := r.connect(ctx, wctx)
	if err != nil {
		return err
	}
	defer client.Close()
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
	r.whoHolds = func(ctx context.Context) string {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		hs, err := client.inspect(ctx, r.g.prefix, []string{r.name})
		if err != nil {
			return "another holder"
		}
		return hs[0].who()
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
	code, lost, err := supervise(r.argv, env, r.sigs, h, r.o.f.timing(), r.stderr)
	if lost != nil {
		return r.commandLost(l, lost)
	}
	rerr := r.release(l)
	if err != nil {
		return err
	}
	return r.afterRelease(l, rerr, fmt.Sprintf("as the command exited with status %d", code),
		fmt.Sprintf("after the command exited with status %d", code), "while the command ran", status(code))
}

// commandLost ends a run whose command was stopped, or not started, for
// the lease (cause: supervise's lost), with --lost-exit.
func (r *runner) commandLost(l *lease.Lease, cause error) error {
	r.releaseLost(l)
	return fail(r.o.f.lostExit, "%s was lost %s: %s; %s", r.how.held, lostWhen(cause), r.w.why(l, cause), lostDone(cause))
}

// connect connects to Redis. With --wait given (and not 0) a Redis that
// does not answer is waited for within wctx, the --wait's context, as it
// is once NAME is waited for; without it, tenure fails at once (exit 69),
// so that a wrong address does not hang a script that relies on the
// default --wait forever.
func (r *runner) connect(ctx, wctx context.Context) (*conns, error) {
	feature := runFeature(r.o.permits, r.o.shared)
	if !r.waitGiven || (!r.o.wait.forever && r.o.wait.d == 0) {
		return r.g.connectFor(ctx, feature)
	}
	client, err := r.g.connectWaiting(wctx, feature, r.o.wait.String())
	if s, ok := r.sigs.interrupted(); ok && err != nil {
		return nil, fail(signalStatus(s), "interrupted by %s while waiting for Redis", signalName(s))
	}
	return client, err
}

// acquire takes NAME as --wait says: one attempt first, then, if NAME is
// held and --wait allows, a wait announced once on stderr with who holds
// NAME. wctx is the --wait's context (ctx itself for forever, and for
// --wait 0, whose one attempt it does not bound).
func (r *runner) acquire(ctx, wctx context.Context) (*lease.Lease, error) {
	l, err := r.how.take(wctx, false)
	if errors.Is(err, lease.ErrNotAcquired) && (r.o.wait.forever || r.o.wait.d > 0) {
		fmt.Fprintf(r.stderr, "tenure: %s; waiting for it (--wait %v)\n", r.how.busy(r.whoHolds(ctx)), r.o.wait.String())
		// A Redis that fails while we wait (a restart, a failover) is
		// waited out too, within --wait.
		l, err = r.g.retrying(wctx, r.how.take)
	}
	if err == nil {
		return l, nil
	}
	if s, ok := r.sigs.interrupted(); ok {
		return nil, fail(signalStatus(s), "interrupted by %s while waiting for %q", signalName(s), r.name)
	}
	if le := (*semaphore.LimitError)(nil); errors.As(err, &le) {
		return nil, fail(exitLimit, "%v: run with -n %d, or add --resize to make it %d", err, le.Held, le.Wanted)
	}
	if errors.Is(err, lease.ErrNotAcquired) {
		return nil, fail(r.o.heldExit, "%s; not acquired within --wait %v", r.how.busy(r.whoHolds(context.Background())), r.o.wait.String())
	}
	return nil, r.g.redisFailure(r.how.acquiring, err)
}

// release releases l, and says so when Redis did not answer in time.
func (r *runner) release(l *lease.Lease) error {
	r.unwatch()
	rerr := release(l, r.releaseTimeout)
	if !r.w.releaseAnswered() {
		reportUnanswered(r.stderr, r.name, releaseWithin(r.releaseTimeout), time.Duration(r.o.f.ttl))
	}
	return rerr
}

// releaseLost releases l after a loss, or after a stop for want of a
// renewal (r.releaseLost's function).
func (r *runner) releaseLost(l *lease.Lease) {
	r.unwatch()
	releaseLost(l, r.w, r.releaseTimeout, r.name, r.stderr)
}

// releaseLost releases l after a loss, or after a stop for want of a
// renewal: a courtesy, since a lost lease is no longer held and one about
// to be lost expires by its deadline. tenure's exit with --lost-exit is
// the word a script gets that the work under NAME ended, and it must come
// before the server could let another holder in: so the release is
// bounded by w.exitBy (when a hold gives NAME up, and a command's group
// is killed) as well as by timeout (--release-timeout), and once that has
// passed it ends the lease locally without a round trip.
func releaseLost(l *lease.Lease, w *leaseWatch, timeout time.Duration, name string, stderr io.Writer) {
	bound := min(timeout, time.Until(w.exitBy(l)))
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	_ = l.Release(ctx)
	if bound > 0 && !w.releaseAnswered() {
		within := releaseWithin(timeout)
		if bound < timeout {
			within = fmt.Sprintf("by %v before the lease's local deadline, past which tenure does not wait after a loss", killMargin(w.ttl))
		}
		reportUnanswered(stderr, name, within, w.ttl)
	}
}

// afterRelease turns the release's error rerr into tenure's exit: ok
// when NAME was held to the end, --lost-exit when the release found it
// lost (exited and ended name what had ended: the command, or the hold).
func (r *runner) afterRelease(l *lease.Lease, rerr error, exited, ended, during string, ok error) error {
	if errors.Is(rerr, lease.ErrLost) {
		// The work ran to its end, but the lease was found lost: another
		// holder may have acted meanwhile, so its success proves nothing.
		if info, found := r.w.ended(l, time.Second); found && info.Loss != "" {
			// Lost between the end and the release.
			return fail(r.o.f.lostExit, "%s was lost %s, before it was released: %s", r.how.held, exited, r.w.lossText(r.w.exitBy(l), info.Loss))
		}
		return fail(r.o.f.lostExit, "%s was found deleted or taken over by another holder when it was released, "+
			"%s: the server no longer had our token, so another holder may have held %q %s",
			r.how.held, ended, r.name, during)
	}
	if rerr != nil && r.w.releaseAnswered() && !errors.Is(rerr, lease.ErrNotHeld) {
		fmt.Fprintf(r.stderr, "tenure: releasing %q: %v; whether the lease was released is unknown: if it was not, it expires by its TTL (%v)\n",
			r.name, rerr, time.Duration(r.o.f.ttl))
	}
	return ok
}

// release releases l, waiting up to timeout. Whether Redis answered in
// time is the manager's hooks' to tell (leaseWatch.releaseAnswered), as
// for the release the election makes on its own.
func release(l *lease.Lease, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return l.Release(ctx)
}

// reportUnanswered says that a release went unanswered within what bounded
// it ("within --release-timeout 2s").
func reportUnanswered(stderr io.Writer, name, within string, ttl time.Duration) {
	fmt.Fprintf(stderr, "tenure: releasing %q: no reply from Redis %s; "+
		"whether the lease was released is unknown: if it was not, it expires by its TTL (%v)\n", name, within, ttl)
}

// releaseWithin is reportUnanswered's words for a release bounded by
// --release-timeout.
func releaseWithin(timeout time.Duration) string {
	return fmt.Sprintf("within --release-timeout %v", timeout)
}

// execFailure is the exit status and message for a command that could not
// be started.
func execFailure(err error) *exitErr {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return &exitErr{code: exitNoCmd, err: err}
	}
	return &exitErr{code: exitNoExec, err: err}
}

// exitStatus is a finished command's status, 128+N when signal N killed it.
func exitStatus(ps *os.ProcessState, err error) int {
	if ps == nil {
		return exitError
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// bare is err's message without the library's "tenure: " prefix, for
// messages that carry their own.
func bare(err error) string { return strings.TrimPrefix(err.Error(), "tenure: ") }
