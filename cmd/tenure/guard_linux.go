package main

// The guard (Linux): tenure itself, started again as the leader of the
// command's process group, which checks the deadline before it starts the
// command and kills the group by the last deadline tenure told it, or at once
// when tenure dies.

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The guard (see group_linux.go) runs from init, not main: during init the
// main goroutine is locked to the process's main thread, which the guard
// keeps (it never returns), so that its name is the one ps shows and the
// thread its Pdeathsig hangs on lives as long as the process.
func init() {
	if len(os.Args) > 1 && os.Args[1] == guardArg {
		runtime.LockOSThread()
		os.Exit(guardMain(os.Args[2:]))
	}
}

// guardMain is the guard: args are the grace and kill margin in
// nanoseconds (stopTiming), then the command's path and argv. It returns
// only when the command could not be started; otherwise it ends killed,
// with its group.
func guardMain(args []string) int {
	clock, path, argv, err := guardArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tenure: "+guardArg+" is tenure's own, not a command")
		return exitUsage
	}
	catchGroupSignals()
	syscall.CloseOnExec(guardFD)
	syscall.CloseOnExec(reportFD)
	// "exe" (of /proc/self/exe) would tell an operator nothing.
	name := []byte("tenure-guard\x00")
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0)

	words := readWords(os.NewFile(guardFD, "tenure"))
	first, ok := <-words
	if !ok {
		return exitError // tenure is gone, before the command started
	}
	clock.dl = first
	if clock.timer, err = newBootTimer(); err != nil {
		fmt.Fprintln(os.Stderr, "tenure: the guard's timer:", err)
		return exitError
	}
	// Non-blocking, so that the clock's report of a stop can never hold
	// up the stop (watchCommand's writes wait in the poller instead).
	_ = unix.SetNonblock(reportFD, true)
	reports := os.NewFile(reportFD, "reports")
	clock.reports = reports
	pid, code := clock.begin(bootNow(), func() (int, int) { return startCommand(path, argv) })
	if pid == 0 {
		return code
	}
	clock.guard(words, watchCommand(pid, reports))
	return exitError // not reached
}

// begin starts the command with start, unless its stop has come due by
// now (tenure was held up since it read the deadline, or the lease's
// deadline passed while the guard started): a command started then would
// be stopped at once, and could run past the deadline meanwhile. It then
// reports the refusal to tenure, which says so and exits --lost-exit, and
// returns the lost status (which tenure replaces with its own) without
// starting anything.
func (g *guardClock) begin(now int64, start func() (pid, code int)) (pid, code int) {
	if now >= g.termAt() {
		g.report(reportRefused)
		return 0, exitLost
	}
	return start()
}

// startCommand starts the command and returns its pid; or 0 and the
// status to exit with, having said why, as tenure itself reports it, since
// tenure cannot tell this status from the command's own.
func startCommand(path string, argv []string) (pid, code int) {
	// Should the guard itself be killed alone, Pdeathsig takes the command
	// with it (not its descendants). It fires when the forking thread
	// exits: this is the main thread (see init).
	c := &exec.Cmd{
		Path:        path,
		Args:        argv,
		Stdin:       os.Stdin,
		Stdout:      os.Stdout,
		Stderr:      os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	}
	if err := c.Start(); err != nil {
		xe := execFailure(err)
		fmt.Fprintln(os.Stderr, "tenure:", oneLine(xe.err.Error()))
		return 0, xe.code
	}
	// Reaped by watchCommand, with wait4: c.Wait would not report stops.
	return c.Process.Pid, 0
}

// guardArgs parses the guard's arguments.
func guardArgs(args []string) (clock *guardClock, path string, argv []string, err error) {
	if len(args) < 4 {
		return nil, "", nil, fmt.Errorf("too few arguments")
	}
	clock = &guardClock{}
	if clock.grace, err = strconv.ParseInt(args[0], 10, 64); err != nil {
		return nil, "", nil, err
	}
	if clock.margin, err = strconv.ParseInt(args[1], 10, 64); err != nil {
		return nil, "", nil, err
	}
	return clock, args[2], args[3:], nil
}

// catchGroupSignals keeps the guard alive through the signals its group
// gets: those tenure forwards, and the terminal's job-control ones, which
// would stop it, and with it the deadline it keeps. Notify, not Ignore:
// an ignored signal would stay ignored in the command across exec, where
// a caught one returns to its default action.
func catchGroupSignals() {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	signal.Notify(sigs, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	go func() {
		for range sigs {
		}
	}()
}

// readWords reads tenure's words (deadlines, termNow) from the word pipe;
// the channel closes when the pipe ends: tenure is gone.
func readWords(r io.Reader) <-chan int64 {
	ch := make(chan int64, 16)
	go func() {
		defer close(ch)
		var b [8]byte
		for {
			if _, err := io.ReadFull(r, b[:]); err != nil {
				return
			}
			ch <- int64(binary.LittleEndian.Uint64(b[:]))
		}
	}()
	return ch
}

// watchCommand reports the command's stops and continues to tenure, and
// its status when it ends; the channel then gets that status.
func watchCommand(pid int, reports io.Writer) <-chan int {
	done := make(chan int, 1)
	go func() {
		for {
			var ws unix.WaitStatus
			_, err := unix.Wait4(pid, &ws, unix.WUNTRACED|unix.WCONTINUED, nil)
			switch {
			case err == unix.EINTR:
				continue
			case err != nil:
				done <- exitError
				return
			case ws.Stopped():
				_, _ = reports.Write([]byte{reportStopped, byte(ws.StopSignal())})
			case ws.Continued():
				_, _ = reports.Write([]byte{reportContinued, 0})
			default:
				code := ws.ExitStatus()
				if ws.Signaled() {
					code = 128 + int(ws.Signal())
				}
				_, _ = reports.Write([]byte{reportExited, byte(code)})
				done <- code
				return
			}
		}
	}()
	return done
}

// guardClock keeps the lease's local deadline as tenure last told it, in
// CLOCK_BOOTTIME nanoseconds, and stops the group by it as supervise
// does: SIGTERM grace before it, SIGKILL margin before it.
type guardClock struct {
	grace, margin int64
	dl            int64
	termed        bool
	timer         *bootTimer
	reports       *os.File // where a stop by the deadline is reported
}

// guard runs until the group dies: when the command ends (after it was
// reported), when tenure is gone, or at the deadline.
func (g *guardClock) guard(words <-chan int64, done <-chan int) {
	g.check()
	for {
		select {
		case v, ok := <-words:
			switch {
			case !ok:
				killGroup() // tenure is gone
			case v == termNow:
				g.term()
			default:
				g.dl = v
			}
			g.check()
		case <-g.timer.C:
			g.check()
		case <-done:
			// Whatever the command left in its group (a background job)
			// must not outlive it: the lease is released next.
			killGroup()
		}
	}
}

// check sends what has come due and sets the timer for what comes next.
func (g *guardClock) check() {
	now := bootNow()
	killAt := g.dl - g.margin
	if now >= killAt {
		g.reportDeadline()
		killGroup()
	}
	termAt := g.termAt()
	if !g.termed && now >= termAt {
		g.reportDeadline()
		g.term()
	}
	next := killAt
	if !g.termed {
		next = termAt
	}
	g.timer.at(next)
}

// termAt is when SIGTERM comes due: grace before the deadline, never
// after SIGKILL (margin before it).
func (g *guardClock) termAt() int64 { return min(g.dl-g.grace, g.dl-g.margin) }

// reportDeadline tells tenure that the guard stops the command by the
// deadline, so that tenure says so and exits 77, as when its own timer
// does it (the guard may act on a deadline that a renewal has moved, just
// before tenure tells it so). One try, never waiting: the stop comes first.
func (g *guardClock) reportDeadline() { g.report(reportDeadline) }

// report writes a report of kind to tenure: one try, never waiting.
func (g *guardClock) report(kind byte) {
	rc, err := g.reports.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Write(func(fd uintptr) bool {
		_, _ = unix.Write(int(fd), []byte{kind, 0})
		return true
	})
}

// term sends the group SIGTERM, once, and SIGCONT so that a stopped
// command acts on it.
func (g *guardClock) term() {
	if g.termed {
		return
	}
	g.termed = true
	_ = syscall.Kill(0, syscall.SIGTERM)
	_ = syscall.Kill(0, syscall.SIGCONT)
}

// killGroup kills the guard's group, the guard included.
func killGroup() {
	_ = syscall.Kill(0, syscall.SIGKILL)
	select {}
}

func bootNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		killGroup() // no clock to keep the deadline by
	}
	return ts.Nano()
}

// bootTimer is a timerfd on CLOCK_BOOTTIME, set to absolute times: C gets
// a value when it fires.
type bootTimer struct {
	fd int
	C  <-chan struct{}
}

func newBootTimer() (*bootTimer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_BOOTTIME, unix.TFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	c := make(chan struct{}, 1)
	go func() {
		var b [8]byte
		for {
			if _, err := unix.Read(fd, b[:]); err != nil && err != unix.EINTR {
				killGroup() // the deadline can no longer be kept
			}
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}()
	return &bootTimer{fd: fd, C: c}, nil
}

// at sets the timer to fire at ns (at once if that has passed).
func (t *bootTimer) at(ns int64) {
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(max(1, ns))}
	if err := unix.TimerfdSettime(t.fd, unix.TFD_TIMER_ABSTIME, &spec, nil); err != nil {
		killGroup()
	}
}
