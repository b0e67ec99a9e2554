package main

// "tenure elect": a campaign for NAME, and COMMAND run (or the leadership
// held alone) for one term; in quorum mode the quorum lease is the
// leadership. elect --observe is in watch.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

// electLong is elect's --help, less the rule for COMMAND and the exit
// statuses.
const electLong = `Campaign for NAME among every "tenure elect" (and every program using package
election) on the same Redis, and run COMMAND while this process leads, with
TENURE_NAME, TENURE_FENCE (the term) and TENURE_IDENTITY in its environment.
The leader record (identity and term) is what "tenure status NAME" shows.

When COMMAND exits, tenure resigns, so another candidate leads at once, and
exits with COMMAND's status; or with status 77 if, before resigning, it finds
that another holder took the lease over. COMMAND is stopped by the lease's local
deadline as in "tenure run" (SIGTERM --grace before it, SIGKILL just before it,
with the same default and limit for --grace), and at once when leadership is
lost; tenure then exits with status 77, waiting for the release no later than
the command's group is killed (as "tenure run" does: before another candidate
could lead), and a supervisor restarting it makes it a candidate again. As with
"tenure run", what COMMAND leaves in its group is killed when it exits; on Linux
a guard stops the group by the last deadline tenure told it, or at once if
tenure dies; and the terminal, SIGTSTP (Ctrl-Z) and a stopped COMMAND are
handled as "tenure run --help" tells. Signals are passed to COMMAND while it
runs; before that they end the campaign. A loss of leadership is reported on
stderr with its reason, as in "tenure run".

Without COMMAND ("tenure elect NAME", as "etcdctl elect NAME"), tenure leads
itself: once elected it prints one line of JSON on stdout,
{"name":…,"kind":"leadership","fence":TERM,"holder":IDENTITY}, then leads
until it gets SIGINT, SIGTERM or SIGHUP or its stdin reaches its end (a
terminal is not read), resigns and exits 0. When leadership is lost, or no
renewal has moved the lease's local deadline by min(TTL/10, 200ms) before it,
tenure says why on stderr and exits 77 at once.

With --observe, tenure does not campaign: it prints the current leader of NAME,
then a line for every change of leader (a new term, or no leader), each with
its time, until SIGINT or SIGTERM ends it with status 0. It learns of changes
from the election's change and release messages, as candidates do, and reads
the leader record again at least every second, in case a message was lost or
a leader died without letting go (then the change shows when its lease
expires). A term that begins and ends between two reads may go unseen, and
while Redis does not answer nothing new is printed.

`

func newElectCmd(g *globals) *cobra.Command {
	var (
		e              elector
		observe        bool
		releaseTimeout derivedDuration
	)
	host, _ := os.Hostname()
	cmd := &cobra.Command{
		Use: `elect [flags] NAME [--] COMMAND [ARGS...]
  tenure elect [flags] NAME
  tenure elect --observe NAME`,
		Short: "Run a command only while this process leads NAME, or lead alone",
		Long:  electLong + commandRule("elect") + "\n\n" + electExitStatuses,
		Example: `  # one scheduler among three hosts; another takes over within --ttl if it dies
  tenure elect --ttl 10s --identity "$(hostname)" scheduler ./scheduler

  # lead until Ctrl-C, as etcdctl elect does
  tenure elect scheduler

  # follow who leads it
  tenure elect --observe scheduler`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: g.completeFirstName,
		RunE: func(cmd *cobra.Command, args []string) error {
			inv, err := parseInvocation(cmd, args, g)
			if err != nil {
				return err
			}
			if observe {
				if err := observeArgs(cmd, inv); err != nil {
					return err
				}
				return observeLeader(g, inv.name, cmd.OutOrStdout())
			}
			if err := e.check(releaseTimeout); err != nil {
				return err
			}
			e.g, e.name, e.argv, e.stdout, e.stderr = g, inv.name, inv.argv, cmd.OutOrStdout(), cmd.ErrOrStderr()
			return e.run()
		},
	}
	e.f.add(cmd)
	cmd.Flags().Var(&releaseTimeout, "release-timeout", "how long to wait for Redis to confirm the end of the term (the check that "+
		"the lease still held, the record's deletion, the release) after COMMAND exits or the leading ends; then tenure exits, "+
		"the outcome unknown (the lease expires by its TTL); default min(TTL, 2s)")
	cmd.Flags().StringVar(&e.identity, "identity", fmt.Sprintf("%s/%d", host, os.Getpid()), "this candidate's identity in the leader record")
	cmd.Flags().BoolVar(&observe, "observe", false, "do not campaign: print every change of leader of NAME until SIGINT")
	// COMMAND's flags are its own: tenure's stop at NAME.
	cmd.Flags().SetInterspersed(false)
	return cmd
}

// observeArgs checks "elect --observe NAME": a name, no command, and none
// of the flags of a candidate, which would do nothing.
func observeArgs(cmd *cobra.Command, inv invocation) error {
	if len(inv.argv) > 0 {
		return fail(exitUsage, "--observe takes NAME alone, no COMMAND: it does not campaign (see '%s --help')", cmd.CommandPath())
	}
	for _, fl := range []string{"ttl", "grace", "identity", "release-timeout"} {
		if cmd.Flags().Changed(fl) {
			return fail(exitUsage, "--%s is a candidate's: it means nothing with --observe, which does not campaign", fl)
		}
	}
	return nil
}

// check validates a candidate's flags, and sets the release timeout from
// --release-timeout (releaseTimeout) or the TTL.
func (e *elector) check(releaseTimeout derivedDuration) error {
	if err := e.f.check(); err != nil {
		return err
	}
	if e.identity == "" {
		return fail(exitUsage, "empty --identity")
	}
	e.releaseTimeout = releaseBound(time.Duration(e.f.ttl))
	if releaseTimeout.set {
		if releaseTimeout.d <= 0 {
			return fail(exitUsage, "--release-timeout must be above 0")
		}
		e.releaseTimeout = releaseTimeout.d
	}
	return nil
}

// elector is one "tenure elect": it campaigns for name, and for one term
// runs argv, or leads without a command when argv is empty.
type elector struct {
	g              *globals
	name, identity string
	argv           []string
	f              childFlags
	releaseTimeout time.Duration
	stdout, stderr io.Writer

	// ctx ends with a signal while no command runs (the campaign, a
	// term without a command); sigs routes the signals.
	ctx    context.Context
	sigs   *sigRouter
	w      *leaseWatch
	client *conns
	// cutOff is set when a term ended in a loss: the lease was released
	// (releaseLost reports an unanswered release) and the connections
	// closed, so the election's own release is not reported.
	cutOff bool
	// unwatch stops watchReleases for the term's lease.
	unwatch func()
}

func (e *elector) run() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.ctx = ctx
	e.sigs = newSigRouter(cancel, e.stderr)
	defer e.sigs.stop()

	client, err := e.g.connect(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	e.client = client
	e.w = newLeaseWatch(e.g.log, time.Duration(e.f.ttl))
	e.w.probe = client.ping
	if client.quorum() {
		return e.runQuorum(client)
	}
	m, err := client.newManager(lease.WithKeyPrefix(e.g.prefix), lease.WithLogger(slog.New(slog.DiscardHandler)),
		lease.WithHooks(e.w.hooks()))
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	defer m.Close()
	el, err := election.New(election.Config{Manager: m, Client: client.one(), KeyPrefix: e.g.prefix, Name: e.name,
		Identity: e.identity, TTL: time.Duration(e.f.ttl), ReleaseTimeout: e.releaseTimeout})
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	return e.campaign(el, cancel)
}

// campaign runs el for one term, which cancel (the campaign's) ends.
//
// A term that ended in a loss (e.cutOff) is tenure's last word: it
// returns as soon as that term's callback has, without waiting for Run to
// end. What Run still does then is the election's own cleanup, which may
// wait on the Redis the term was cut off from: Observe's pub/sub, when
// go-redis is reconnecting it, holds its lock while it dials and sends
// HELLO, and closing it waits for that (1.4s measured behind a black
// hole), which kept tenure running past the moment another candidate
// could lead (TestCutOffElectExitsFirst). Nothing of it can matter once
// the term is over; it ends with the process.
func (e *elector) campaign(el *election.Election, cancel context.CancelFunc) error {
	var (
		result error
		ran    bool
	)
	cutOff := make(chan struct{}) // closed when a term ended in a loss
	done := make(chan error, 1)
	go func() {
		done <- el.Run(e.ctx, election.Callbacks{
			OnStartedLeading: func(lctx context.Context) {
				// One term only: resign (a no-op after a loss) and stop campaigning.
				defer cancel()
				defer func() { _ = el.Resign(lctx) }()
				ran = true
				result = e.lead(lctx)
				if e.cutOff {
					close(cutOff)
				}
			},
			OnNewLeader: func(id string) {
				select {
				case <-cutOff: // tenure's last word is said: nothing more
				default:
					if id != e.identity {
						fmt.Fprintf(e.stderr, "tenure: %q is led by %s\n", e.name, id)
					}
				}
			},
		})
	}()
	var err error
	select {
	case err = <-done:
	case <-cutOff:
		return result
	}
	if ran {
		if !e.cutOff && !e.w.releaseAnswered() {
			reportUnanswered(e.stderr, e.name, releaseWithin(e.releaseTimeout), time.Duration(e.f.ttl))
		}
		return result
	}
	if s, ok := e.sigs.interrupted(); ok {
		return fail(signalStatus(s), "interrupted by %s while campaigning for %q", signalName(s), e.name)
	}
	if err != nil {
		return e.g.redisFailure(fmt.Sprintf("campaigning for %q", e.name), err)
	}
	return fail(exitError, "the campaign for %q ended without leading", e.name)
}

// lead runs argv (or leads without it) for one term of leadership, whose
// leading context is lctx, and returns tenure's exit for it.
func (e *elector) lead(lctx context.Context) error {
	rec, _ := election.Leading(lctx)
	// The leading context derives from the lease's, whose deadline the
	// command must not outlive.
	l, ok := lease.FromContext(lctx)
	if !ok {
		return fail(exitError, "leading %q: the leading context carries no lease", e.name)
	}
	// release --force is noticed at once; the listening ends before the
	// election releases the lease, when this returns.
	e.unwatch = watchReleases(e.client, e.g.prefix, l, time.Duration(e.f.ttl), e.g.log)
	defer e.unwatch()
	code, lost, err := e.term(lctx, l, rec.Fence)
	if lost {
		// The command is dead and the lease lost, or about to be for want
		// of a renewal. As tenure run does, term released it no later
		// than the command's group is killed (e.releaseLost); now close
		// the connections: nothing else still on its way to Redis (the
		// record's refresh, the election's own release) can matter, and
		// waiting for a reply that may never come would keep tenure
		// running past the moment another candidate may lead
		// (TestCutOffElectExitsFirst).
		e.cutOff = true
		_ = e.client.Close()
	}
	if err != nil {
		return err
	}
	return e.confirmHeld(l, rec.Fence, code)
}

// term runs argv while lctx, the context of the term's lease l, lasts, or
// leads without a command: the command's exit status, or tenure's exit
// when it could not run or the leadership was lost (lost is then true).
func (e *elector) term(lctx context.Context, l *lease.Lease, term int64) (code int, lost bool, err error) {
	if len(e.argv) == 0 {
		return e.leadAlone(l, term)
	}
	env := append(childEnv(), "TENURE_NAME="+e.name, "TENURE_FENCE="+strconv.FormatInt(term, 10),
		"TENURE_IDENTITY="+e.identity)
	describe := func(cause error) string {
		return fmt.Sprintf("leadership of %q (term %d) was lost: %s", e.name, term, e.w.why(l, cause))
	}
	code, cause, dead, err := supervise(e.argv, env, e.sigs, hold{lctx, l.Deadline, e.w.renewals(), describe, e.w.renewErrorOf(l)},
		e.f.timing(), e.stderr)
	switch {
	case err != nil:
		return 0, false, err
	case cause != nil:
		e.releaseLost(l, dead)
		return 0, true, fail(e.f.lostExit, "leadership of %q (term %d) was lost %s: %s; %s",
			e.name, term, lostWhen(cause), e.w.why(l, cause), lostDone(cause))
	}
	return code, false, nil
}

// leadAlone is a term without a command: it says that it leads, then
// leads until a signal or the end of stdin (code 0), or until the
// leadership is lost, or about to be for want of a renewal (lost).
func (e *elector) leadAlone(l *lease.Lease, term int64) (code int, lost bool, err error) {
	line, _ := json.Marshal(acquiredLine{Name: e.name, Kind: "leadership", Fence: term, Holder: e.identity})
	fmt.Fprintf(e.stdout, "%s\n", line)
	cause := holdUntil(e.ctx, l, e.w.renewals(), killMargin(time.Duration(e.f.ttl)))
	if cause == nil {
		return 0, false, nil
	}
	e.releaseLost(l, true)
	return 0, true, fail(e.f.lostExit, "leadership of %q (term %d) was lost while held: %s", e.name, term, e.w.why(l, cause))
}

// runQuorum is elect in quorum mode. Package election keeps a leader
// record written in a transaction guarded by the lease (Lease.Exec), which
// cannot span independent servers; so here the leadership is the quorum
// lease on NAME itself, taken by waiting for it, with the candidate's
// identity as its holder (status and list show it as the holder). One
// leader at a time, a loss that stops the command, the term's fence in
// TENURE_FENCE and the exit statuses are those of a Sentinel or single
// server; what it lacks is the record: elect --observe and the "led by"
// line.
func (e *elector) runQuorum(client *conns) error {
	m, err := client.newManager(lease.WithKeyPrefix(e.g.prefix), lease.WithTTL(time.Duration(e.f.ttl)), lease.WithHolder(e.identity),
		lease.WithLogger(slog.New(slog.DiscardHandler)), lease.WithHooks(e.w.hooks()))
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	defer m.Close()
	l, err := e.g.retrying(e.ctx, func(ctx context.Context, wait bool) (*lease.Lease, error) {
		if wait {
			return m.Acquire(ctx, e.name)
		}
		return m.TryAcquire(ctx, e.name)
	})
	if err != nil {
		if s, ok := e.sigs.interrupted(); ok {
			return fail(signalStatus(s), "interrupted by %s while campaigning for %q", signalName(s), e.name)
		}
		return e.g.redisFailure(fmt.Sprintf("campaigning for %q", e.name), err)
	}
	e.unwatch = watchReleases(client, e.g.prefix, l, time.Duration(e.f.ttl), e.g.log)
	code, lost, err := e.term(l.Context(), l, l.Fence())
	e.unwatch()
	if lost {
		return err // term released it (e.releaseLost)
	}
	rerr := release(l, e.releaseTimeout)
	if !e.w.releaseAnswered() {
		reportUnanswered(e.stderr, e.name, releaseWithin(e.releaseTimeout), time.Duration(e.f.ttl))
	}
	if err != nil {
		return err
	}
	if errors.Is(rerr, lease.ErrLost) {
		return fail(e.f.lostExit, "leadership of %q (term %d) was found lost %s: "+
			"it was deleted, taken over or expired, so another candidate may have led meanwhile", e.name, l.Fence(), e.ended(code))
	}
	return status(code)
}

// releaseLost releases the term's lease l after a loss, or after a stop
// for want of a renewal, once the listening for release --force ended;
// dead says that nothing of the command runs any more, so that a
// revocation may be confirmed (releaseLost, confirmRevoked).
func (e *elector) releaseLost(l *lease.Lease, dead bool) {
	e.unwatch()
	var confirm func(context.Context) bool
	if dead {
		confirm = func(ctx context.Context) bool { return confirmRevoked(ctx, e.client, e.g.prefix, e.name, l.Token()) }
	}
	releaseLost(l, e.w, e.releaseTimeout, e.name, e.stderr, confirm)
}

// ended says what ended a term that ended by itself, for messages.
func (e *elector) ended(code int) string {
	if len(e.argv) == 0 {
		return "as the leading ended"
	}
	return fmt.Sprintf("after the command exited with status %d", code)
}

// confirmHeld ends a term whose command exited by itself (or that led
// without one until a signal or the end of stdin): the election releases
// the lease after this callback but drops the release's error, so a
// takeover between the last renewal and the term's end would go unseen.
// An empty transaction guarded by the lease reads the key instead: if it
// still holds this lease's token, nobody else held the name meanwhile.
func (e *elector) confirmHeld(l *lease.Lease, term int64, code int) error {
	ctx, cancel := context.WithTimeout(context.Background(), e.releaseTimeout)
	defer cancel()
	_, err := l.Exec(ctx, func(redis.Pipeliner) error { return nil })
	switch {
	case errors.Is(err, lease.ErrLost):
		why := "it was deleted or taken over by another holder (the server no longer had our token), " +
			"so another holder may have led meanwhile"
		if info, ok := e.w.ended(l, time.Second); ok && info.Loss == lease.LossExpired {
			why = lossText(info.Loss)
		}
		return fail(e.f.lostExit, "leadership of %q (term %d) was found lost %s: %s", e.name, term, e.ended(code), why)
	case err != nil:
		fmt.Fprintf(e.stderr, "tenure: confirming the leadership of %q %s: %v\n", e.name, e.ended(code), err)
	}
	return status(code)
}
