package main

// Supervision of a command run under a lease ("tenure run", "tenure
// elect"): its process group is stopped by the lease's local deadline, at
// once on a loss, and killed when it stays stopped; on Linux the guard keeps
// the deadline too (group_linux.go, guard_linux.go).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// errNearDeadline is the cause of a stop that tenure started because no
// renewal had moved the lease's local deadline out of --grace's reach.
//
//lint:ignore ST1005 it begins with a name, Redis
var errNearDeadline = errors.New("Redis did not confirm a renewal in time (unreachable, slow or paused)")

// renewFailure is what a message that says Redis did not confirm a
// renewal in time adds about why: ": the last renewal failed: ERR", or
// nothing when no renewal failed outright (one still in flight).
func renewFailure(last error) string {
	if last == nil {
		return ""
	}
	return ": the last renewal failed: " + oneLine(bare(last))
}

// errDeadlinePassed is the cause of a stop that tenure came to only after
// the local deadline had passed: tenure itself was stopped or starved.
var errDeadlinePassed = errors.New("tenure could not renew the lease before its local deadline " +
	"(tenure itself was stopped, or starved of CPU)")

// hold is what supervise knows of the lease a command runs under.
type hold struct {
	ctx      context.Context          // ends when the lease is lost
	deadline func() time.Time         // the local deadline, which renewals move forward
	renewed  <-chan struct{}          // pokes after renewals
	describe func(cause error) string // the notice printed when ctx ends, from its cause
	lastErr  func() error             // the last failed renewal's error, nil if none failed
}

// renewErr is the last failed renewal's error, nil if none (or unknown).
func (h hold) renewErr() error {
	if h.lastErr == nil {
		return nil
	}
	return h.lastErr()
}

// supervise runs argv in a process group of its own, passes tenure's
// signals to it, and stops it by the lease's local deadline (renewals move
// it forward): SIGTERM to the group at (deadline − grace), or at once when
// the lease is lost, and SIGKILL at (deadline − killMargin), so that
// nothing of the group runs at the deadline, after which another holder
// may get the name. On Linux the guard is told every deadline and keeps it
// too, whatever becomes of tenure. A command stopped by SIGTSTP is
// continued; one stopped otherwise is killed after stoppedFor. It returns
// the command's exit status (128+N when killed by signal N) and, when
// tenure stopped the command for the lease, why: the lease context's
// cause, errNearDeadline or errDeadlinePassed. After a stop for the lease
// it waits, until the local deadline at most, for every process of the
// group to be gone; dead says whether they were seen gone (always true
// when the command never started): only then may a revoked holder confirm
// that its work is dead (confirmRevoked).
func supervise(argv, env []string, sigs *sigRouter, h hold, t stopTiming, stderr io.Writer) (code int, lost error, dead bool, err error) {
	c := exec.Command(argv[0], argv[1:]...)
	if c.Err != nil {
		return 0, nil, true, execFailure(c.Err)
	}
	dl := h.deadline()
	if cause := stopDue(h, t, dl, time.Now()); cause != nil {
		return 0, notStarted{cause}, true, nil
	}
	p, err := startGroup(c.Path, argv, env, t, dl)
	if err != nil {
		return 0, nil, true, err
	}
	sigs.setChild(p.pgid)
	defer sigs.setChild(0)
	n := startNotices(stderr)
	defer n.close()

	s := &supervisor{p: p, h: h, t: t, say: n.say}
	lost = s.run()
	// Whatever the command left in its group (a background job) must not
	// outlive the lease, which is released next. (The guard does it too.)
	p.signal(syscall.SIGKILL)
	sigs.setChild(0)
	dead = true
	if lost != nil {
		// Before the leader is reaped, so that its group id cannot be
		// reused meanwhile.
		dead = groupGone(p.pgid, h.deadline())
	}
	return p.reap(), lost, dead, nil
}

// stopDue returns why the command must not start now, when the lease is
// already lost or its stop (SIGTERM, --grace before the local deadline dl)
// has come due: it would be started only to be stopped, and could run past
// the deadline meanwhile. The guard checks dl again before it starts the
// command, in case tenure is held up between here and there.
func stopDue(h hold, t stopTiming, dl, now time.Time) error {
	if h.ctx.Err() != nil {
		return context.Cause(h.ctx)
	}
	termAt, _ := t.at(dl)
	switch {
	case !now.Before(dl):
		return errDeadlinePassed
	case !now.Before(termAt):
		return errNearDeadline
	}
	return nil
}

// notStarted is the cause of a loss that came before the command started
// (stopDue): it reads as its cause, and tells tenure's last word that the
// command was never started.
type notStarted struct{ cause error }

func (e notStarted) Error() string { return e.cause.Error() }
func (e notStarted) Unwrap() error { return e.cause }

// lostWhen and lostDone are the words of tenure's last word after the
// lease was lost with cause: while the command ran, and it was stopped,
// or before it started, and it was not.
func lostWhen(cause error) string {
	if errors.As(cause, new(notStarted)) {
		return "before the command started"
	}
	return "while the command ran"
}

func lostDone(cause error) string {
	if errors.As(cause, new(notStarted)) {
		return "the command was not started"
	}
	return "the command was stopped"
}

// supervisor stops a command's group by the lease's deadline.
type supervisor struct {
	p   *group
	h   hold
	t   stopTiming
	say func(func() string)

	lost           error
	told           time.Time // the deadline last told to the guard
	toldBoot       int64     // the same, as the guard has it (group.tell)
	termed, killed bool
	stoppedBy      syscall.Signal // what stopped the command, 0 while it runs
	stoppedAt      time.Time
}

// run returns when the command's group leader has exited, with why
// tenure stopped it, if it did.
func (s *supervisor) run() (lost error) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	ended := s.h.ctx.Done()
	for {
		var wake <-chan time.Time
		if next, ok := s.due(time.Now()); ok {
			timer.Reset(time.Until(next))
			wake = timer.C
		}
		select {
		case <-s.p.exited:
			if s.p.refused() {
				return s.refused(time.Now())
			}
			s.due(time.Now())
			s.noteGuardStop(time.Now())
			return s.lost
		case <-ended:
			ended = nil
			s.loseLease(context.Cause(s.h.ctx))
		case <-s.p.changed:
			s.noteGuardStop(time.Now())
			s.jobChanged(time.Now())
		case <-s.h.renewed:
		case <-wake:
		}
	}
}

// due does what has come due by now: it tells the guard a moved deadline,
// stops the command near the deadline, and kills a command stopped too
// long. It returns when something next comes due; false when nothing will.
// The deadline is read again on every turn: each renewal moves it, and
// with it both signals, forward.
func (s *supervisor) due(now time.Time) (time.Time, bool) {
	dl := s.h.deadline()
	if !dl.Equal(s.told) {
		s.told = dl
		s.toldBoot = s.p.tell(dl)
	}
	termAt, killAt := s.t.at(dl)
	if !s.termed && !now.Before(termAt) {
		s.nearDeadline(now, dl)
	}
	if !s.killed && !now.Before(killAt) {
		s.killed = true
		s.p.signal(syscall.SIGKILL)
	}
	if s.stoppedBy != 0 && !s.killed && !now.Before(s.stoppedAt.Add(s.t.stoppedFor)) {
		s.killStopped()
	}
	if s.killed {
		return time.Time{}, false
	}
	next := killAt
	if !s.termed {
		next = termAt
	}
	if s.stoppedBy != 0 {
		next = earliest(next, s.stoppedAt.Add(s.t.stoppedFor))
	}
	return next, true
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// nearDeadline stops the command because no renewal moved the deadline
// dl out of --grace's reach by now.
func (s *supervisor) nearDeadline(now, dl time.Time) {
	left := dl.Sub(now).Round(time.Millisecond)
	if left > 0 {
		s.lost = errNearDeadline
		s.term(func() string {
			return fmt.Sprintf("Redis has not confirmed a renewal of the lease in time (unreachable, slow or paused)%s, "+
				"and its local deadline is in %v", renewFailure(s.h.renewErr()), left)
		}, dl)
		return
	}
	s.lost = errDeadlinePassed
	s.term(func() string {
		return fmt.Sprintf("the lease's local deadline passed %v ago, before tenure could renew it "+
			"(tenure itself was stopped, or starved of CPU)", -left)
	}, dl)
}

// noteGuardStop takes up a stop that the guard made by the deadline
// before tenure's own timer fired: tenure says so and exits 77, as if its
// own timer had fired first. The guard keeps the deadline as tenure told
// it, which errs early by a few microseconds, so it often comes first; if
// tenure's last word has come due, the stop is tenure's own
// (nearDeadline). Otherwise the guard acted on an earlier deadline, a
// renewal not told in time (tenure slow).
func (s *supervisor) noteGuardStop(now time.Time) {
	if s.termed || !s.p.guardStopped() {
		return
	}
	if s.p.reached(s.toldBoot - int64(max(s.t.grace, s.t.killMargin))) {
		s.nearDeadline(now, s.h.deadline())
		return
	}
	s.termed = true
	s.lost = errNearDeadline
	s.say(func() string {
		return "tenure: the guard stopped the command by the lease's local deadline that it was last told: " +
			"no renewal was confirmed, or reached the guard, in time (Redis unreachable, slow or paused, or tenure slow)" +
			renewFailure(s.h.renewErr())
	})
}

// refused is why the guard did not start the command: its stop had come
// due by the deadline it was told, which tenure's own clock (on a value
// that errs late next to the guard's) may see a moment later.
func (s *supervisor) refused(now time.Time) error {
	cause := stopDue(s.h, s.t, s.h.deadline(), now)
	if cause == nil {
		cause = errNearDeadline
	}
	return notStarted{cause}
}

// loseLease stops the command at once: the lease was lost.
func (s *supervisor) loseLease(cause error) {
	// A loss that follows a deadline passed unrenewed is its consequence:
	// the earlier cause says why (tenure was stopped or starved).
	if s.lost != errDeadlinePassed {
		s.lost = cause
	}
	if !s.termed {
		s.term(func() string { return s.h.describe(cause) }, s.h.deadline())
	}
}

// term sends the group SIGTERM and says why, and when SIGKILL follows.
func (s *supervisor) term(why func() string, dl time.Time) {
	s.termed = true
	s.p.term()
	in := max(0, time.Until(dl.Add(-s.t.killMargin))).Round(time.Millisecond)
	s.say(func() string {
		return fmt.Sprintf("tenure: %s; sent SIGTERM to the command, SIGKILL in %v", why(), in)
	})
}

// jobChanged acts on the command's being stopped or continued: a stop
// by SIGTSTP (Ctrl-Z) is refused, any other is reported and timed.
func (s *supervisor) jobChanged(now time.Time) {
	sig := s.p.stoppedBy()
	switch {
	case sig == 0:
		if s.stoppedBy != 0 {
			s.say(func() string { return "tenure: the command was continued" })
		}
		s.stoppedBy = 0
	case sig == syscall.SIGTSTP:
		s.p.signal(syscall.SIGCONT)
		s.say(func() string {
			return "tenure: the command was stopped by SIGTSTP (Ctrl-Z); a command under a lease is not stopped " +
				"(it would hold the lease doing nothing): continued it (SIGCONT)"
		})
	case s.stoppedBy == 0:
		s.stoppedBy, s.stoppedAt = sig, now
		bound := s.t.stoppedFor
		s.say(func() string {
			return fmt.Sprintf("tenure: the command was stopped by %s%s; a stopped command holds the lease doing nothing: "+
				"unless it is continued within %v (--ttl), tenure kills its process group", unix.SignalName(sig), stopCause(sig), bound)
		})
	}
}

// stopCause says what a stop by sig usually means.
func stopCause(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTTIN:
		return " (it read from the terminal while its process group was not the terminal's foreground, " +
			"as when tenure runs in the background)"
	case syscall.SIGTTOU:
		return " (it wrote to or set up the terminal while its process group was not the terminal's foreground, " +
			"as when tenure runs in the background)"
	}
	return ""
}

// killStopped kills the group of a command that stayed stopped too long.
func (s *supervisor) killStopped() {
	s.killed = true
	s.p.signal(syscall.SIGKILL)
	sig, bound := s.stoppedBy, s.t.stoppedFor
	s.say(func() string {
		return fmt.Sprintf("tenure: the command stayed stopped (%s) for %v: killed its process group (SIGKILL)",
			unix.SignalName(sig), bound)
	})
}

// notices prints tenure's notices from a goroutine of its own: a stderr
// that blocks (a pipe nobody reads) must not hold back a signal; nor must
// working out a notice's words (describe may wait a moment for the
// lease's report of why it was lost).
type notices struct {
	ch   chan func() string
	done chan struct{}
}

func startNotices(w io.Writer) *notices {
	n := &notices{ch: make(chan func() string, 16), done: make(chan struct{})}
	go func() {
		defer close(n.done)
		for s := range n.ch {
			fmt.Fprintln(w, s())
		}
	}()
	return n
}

// say queues a notice; it drops it when 16 wait already, behind a stderr
// that does not drain.
func (n *notices) say(s func() string) {
	select {
	case n.ch <- s:
	default:
	}
}

func (n *notices) close() {
	close(n.ch)
	<-n.done
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
