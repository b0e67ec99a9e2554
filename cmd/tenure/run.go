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

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

// forwarded are the signals passed on to the command's process group.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// childFlags are the flags of the subcommands that run a command.
type childFlags struct {
	ttl   durationFlag
	grace durationFlag
}

func (f *childFlags) add(cmd *cobra.Command) {
	f.ttl = durationFlag(lease.DefaultTTL)
	f.grace = durationFlag(10 * time.Second)
	cmd.Flags().Var(&f.ttl, "ttl", "the lease's TTL: renewed every TTL/3; a holder that dies frees NAME within it")
	cmd.Flags().Var(&f.grace, "grace", "after a loss, how long the command has between SIGTERM and SIGKILL")
}

func (f *childFlags) check() error {
	if time.Duration(f.ttl) < lease.MinTTL {
		return fail(exitUsage, "--ttl %v is below the minimum %v", time.Duration(f.ttl), lease.MinTTL)
	}
	return nil
}

// nameAndCommand splits "NAME -- CMD ARGS..." and validates NAME.
func nameAndCommand(cmd *cobra.Command, args []string) (string, []string, error) {
	dash := cmd.ArgsLenAtDash()
	if dash != 1 || len(args) < 2 {
		return "", nil, fail(exitUsage, "want NAME -- COMMAND [ARGS...] (see '%s --help')", cmd.CommandPath())
	}
	if err := checkName(args[0]); err != nil {
		return "", nil, fail(exitUsage, "%v", err)
	}
	return args[0], args[1:], nil
}

func newRunCmd(g *globals) *cobra.Command {
	var (
		f    childFlags
		wait = waitFlag{forever: true}
	)
	cmd := &cobra.Command{
		Use:   "run [flags] NAME -- COMMAND [ARGS...]",
		Short: "Run a command while holding a lease on NAME",
		Long: `Acquire a lease on NAME (waiting up to --wait while another holder has it), run
COMMAND with TENURE_NAME and TENURE_FENCE (the lease's fencing token) in its
environment, renew the lease while it runs, release it when it exits, and exit
with its status.

COMMAND runs in a process group of its own. Signals sent to tenure (INT, TERM,
HUP, QUIT, USR1, USR2) are passed to that group. If the lease is lost (it was
deleted or taken over, or Redis could not confirm a renewal before the lease's
local deadline), the group gets SIGTERM, then SIGKILL after --grace, and tenure
exits with status 77. Being in its own process group, COMMAND cannot read from
the terminal.

` + exitStatuses,
		Example: `  # one nightly report at a time, across every host that runs this
  tenure run nightly-report -- ./report.sh --since yesterday

  # give up after 10s if another host is at it; a short TTL frees NAME fast if we die
  tenure run --wait 10s --ttl 5s backup -- pg_dump -f /backups/db.sql

  # pass the fencing token on to the resource you write to
  tenure run migrate -- sh -c 'migrate --fence "$TENURE_FENCE"'`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, argv, err := nameAndCommand(cmd, args)
			if err != nil {
				return err
			}
			if err := f.check(); err != nil {
				return err
			}
			return runUnderLease(g, name, argv, f, wait, cmd.ErrOrStderr())
		},
	}
	f.add(cmd)
	cmd.Flags().Var(&wait, "wait", `how long to wait for NAME while it is held: a duration, 0 for one attempt, or "forever"`)
	return cmd
}

// sigRouter receives tenure's signals: it forwards them to the command's
// process group while one runs, and otherwise cancels the wait.
type sigRouter struct {
	ch     chan os.Signal
	mu     sync.Mutex
	pgid   int
	got    os.Signal
	cancel context.CancelFunc
	done   chan struct{}
}

func newSigRouter(cancel context.CancelFunc) *sigRouter {
	r := &sigRouter{ch: make(chan os.Signal, 8), cancel: cancel, done: make(chan struct{})}
	signal.Notify(r.ch, forwarded...)
	go func() {
		defer close(r.done)
		for s := range r.ch {
			r.mu.Lock()
			if r.pgid > 0 {
				_ = syscall.Kill(-r.pgid, s.(syscall.Signal))
			} else if r.got == nil {
				r.got = s
				r.cancel()
			}
			r.mu.Unlock()
		}
	}()
	return r
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
}

// signalStatus is 128+N for signal N.
func signalStatus(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return exitError
}

func runUnderLease(g *globals, name string, argv []string, f childFlags, wait waitFlag, stderr io.Writer) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := newSigRouter(cancel)
	defer sigs.stop()

	client, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	m, err := lease.New(client, lease.WithKeyPrefix(g.prefix), lease.WithTTL(time.Duration(f.ttl)),
		lease.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	defer m.Close()

	var l *lease.Lease
	switch {
	case wait.forever:
		l, err = m.Acquire(ctx, name)
	case wait.d == 0:
		l, err = m.TryAcquire(ctx, name)
	default:
		wctx, wcancel := context.WithTimeout(ctx, wait.d)
		l, err = m.Acquire(wctx, name)
		wcancel()
	}
	if err != nil {
		if s, ok := sigs.interrupted(); ok {
			return fail(signalStatus(s), "interrupted by %v while waiting for %q", s, name)
		}
		if errors.Is(err, lease.ErrNotAcquired) {
			return fail(exitTimeout, "%q is held by another holder; not acquired within --wait %v", name, wait.String())
		}
		return fail(exitRedis, "acquiring %q: %v", name, err)
	}

	env := append(os.Environ(), "TENURE_NAME="+name, "TENURE_FENCE="+strconv.FormatInt(l.Fence(), 10))
	code, lost, err := supervise(argv, env, sigs, l.Context(), time.Duration(f.grace), stderr)
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	rerr := l.Release(rctx)
	if err != nil {
		return err
	}
	if lost != nil {
		return fail(exitLost, "the lease on %q was lost while the command ran (%s); the command was stopped", name, bare(lost))
	}
	if rerr != nil && !errors.Is(rerr, lease.ErrNotHeld) {
		fmt.Fprintf(stderr, "tenure: releasing %q: %v (it expires by its TTL)\n", name, rerr)
	}
	return status(code)
}

// supervise runs argv in a process group of its own, passes tenure's
// signals to it, and stops it when ctx ends: SIGTERM to the group, SIGKILL
// after grace. It returns the command's exit status (128+N when killed by
// signal N) and, when ctx ended first, ctx's cause.
func supervise(argv, env []string, sigs *sigRouter, ctx context.Context, grace time.Duration, stderr io.Writer) (code int, lost error, err error) {
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = env
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return 0, nil, fail(exitNoCmd, "%v", err)
		}
		return 0, nil, fail(exitNoExec, "%v", err)
	}
	pgid := c.Process.Pid
	sigs.setChild(pgid)
	defer sigs.setChild(0)
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()

	var (
		kill     <-chan time.Time
		deadline time.Time
		werr     error
	)
	ended := ctx.Done()
wait:
	for {
		select {
		case werr = <-exited:
			break wait
		case <-ended:
			ended = nil
			lost = context.Cause(ctx)
			fmt.Fprintf(stderr, "tenure: %s; sending SIGTERM to the command, SIGKILL in %v\n", bare(lost), grace)
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			deadline = time.Now().Add(grace)
			t := time.NewTimer(grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	if lost != nil {
		// Nothing of the group may outlive the grace period.
		for syscall.Kill(-pgid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	return exitStatus(c.ProcessState, werr), lost, nil
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

func newElectCmd(g *globals) *cobra.Command {
	var (
		f        childFlags
		identity string
	)
	host, _ := os.Hostname()
	cmd := &cobra.Command{
		Use:   "elect [flags] NAME -- COMMAND [ARGS...]",
		Short: "Run a command only while this process is the elected leader of NAME",
		Long: `Campaign for NAME among every "tenure elect" (and every program using package
election) on the same Redis, and run COMMAND while this process leads, with
TENURE_NAME, TENURE_FENCE (the term) and TENURE_IDENTITY in its environment.
The leader record (identity and term) is what "tenure status NAME" shows.

When COMMAND exits, tenure resigns, so another candidate leads at once, and exits
with COMMAND's status. When leadership is lost, COMMAND is stopped as in "tenure
run" (SIGTERM to its process group, SIGKILL after --grace) and tenure exits
with status 77; a supervisor restarting it makes it a candidate again.
Signals are passed to COMMAND while it runs; before that they end the campaign.

` + exitStatuses,
		Example: `  # one scheduler among three hosts; the others take over within --ttl if it dies
  tenure elect --ttl 10s --identity "$(hostname)" scheduler -- ./scheduler`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, argv, err := nameAndCommand(cmd, args)
			if err != nil {
				return err
			}
			if err := f.check(); err != nil {
				return err
			}
			if identity == "" {
				return fail(exitUsage, "empty --identity")
			}
			return runElected(g, name, identity, argv, f, cmd.ErrOrStderr())
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&identity, "identity", fmt.Sprintf("%s/%d", host, os.Getpid()), "this candidate's identity in the leader record")
	return cmd
}

func runElected(g *globals, name, identity string, argv []string, f childFlags, stderr io.Writer) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := newSigRouter(cancel)
	defer sigs.stop()

	client, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	m, err := lease.New(client, lease.WithKeyPrefix(g.prefix), lease.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	defer m.Close()
	e, err := election.New(election.Config{Manager: m, Client: client, KeyPrefix: g.prefix, Name: name,
		Identity: identity, TTL: time.Duration(f.ttl)})
	if err != nil {
		return fail(exitUsage, "%v", err)
	}

	var (
		result error
		ran    bool
	)
	err = e.Run(ctx, election.Callbacks{
		OnStartedLeading: func(lctx context.Context) {
			rec, _ := election.Leading(lctx)
			env := append(os.Environ(), "TENURE_NAME="+name, "TENURE_FENCE="+strconv.FormatInt(rec.Fence, 10),
				"TENURE_IDENTITY="+identity)
			code, lost, err := supervise(argv, env, sigs, lctx, time.Duration(f.grace), stderr)
			ran = true
			switch {
			case err != nil:
				result = err
			case lost != nil:
				result = fail(exitLost, "leadership of %q (term %d) was lost while the command ran (%s); the command was stopped", name, rec.Fence, bare(lost))
			default:
				result = status(code)
			}
			// One term only: resign (a no-op after a loss) and stop campaigning.
			_ = e.Resign(lctx)
			cancel()
		},
		OnNewLeader: func(id string) {
			if id != identity {
				fmt.Fprintf(stderr, "tenure: %q is led by %s\n", name, id)
			}
		},
	})
	if ran {
		return result
	}
	if s, ok := sigs.interrupted(); ok {
		return fail(signalStatus(s), "interrupted by %v while campaigning for %q", s, name)
	}
	if err != nil {
		return fail(exitRedis, "campaigning for %q: %v", name, err)
	}
	return fail(exitError, "the campaign for %q ended without leading", name)
}

// bare is err's message without the library's "tenure: " prefix, for
// messages that carry their own.
func bare(err error) string { return strings.TrimPrefix(err.Error(), "tenure: ") }
