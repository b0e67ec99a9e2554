package main

// A command's process group on Linux: started under the guard (guard_linux.go),
// told each deadline over a pipe, and reporting the command's stops and exit.

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// On Linux a command runs under a guard (guard_linux.go): tenure starts
// itself again (/proc/self/exe, so a binary replaced on disk meanwhile does
// not matter) with guardArg, as the leader of a new process group, and the
// guard runs the command in that group. Two pipes join them:
//
//   - the word pipe, tenure to guard, whose only write end is tenure's. On
//     it tenure tells the guard each new local deadline of the lease (and
//     asks it for the SIGTERM of a stop); the guard stops the group by the
//     last deadline it was told, so the group is dead by it whatever
//     becomes of tenure (stopped, starved of CPU, killed). When tenure dies
//     in any way the kernel closes the write end, and the guard kills the
//     group at once. A pipe rather than Pdeathsig alone: Pdeathsig fires
//     when the forking OS thread exits, not the process, and would kill the
//     guard before it could kill the group.
//   - the report pipe, guard to tenure: the command's stops and continues,
//     and its exit status (the guard then kills the group, itself included,
//     so that nothing of it outlives the command).
const guardArg = "__tenure-guard"

const (
	guardFD  = 3 // the word pipe's read end in the guard (ExtraFiles[0])
	reportFD = 4 // the report pipe's write end in the guard (ExtraFiles[1])
)

// termNow, in place of a deadline on the word pipe, asks the guard to send
// the group SIGTERM now (once: the guard sends it at most once, whoever
// asks), so that the group never gets two for one stop.
const termNow = -1

// Reports on the report pipe: two bytes, a kind and a value.
const (
	reportStopped   = 'S' // the command was stopped by signal value
	reportContinued = 'C' // the command was continued
	reportExited    = 'X' // the command ended with status value (128+N for signal N)
	reportDeadline  = 'D' // the guard stops the group by the deadline it was told
	reportRefused   = 'R' // the guard did not start the command: its stop had come due
)

// group is a command's running process group.
type group struct {
	pgid    int
	exited  <-chan struct{} // closed when the guard has exited, before it is reaped
	changed <-chan struct{} // pokes when the command is stopped or continued
	guard   *exec.Cmd
	word    *os.File // tenure's end of the word pipe
	reports *reports
	tty     *os.File // the terminal whose foreground the group got, or nil
}

// startGroup starts the guard, which runs path with argv and env, stops
// the group by the local deadline dl (and later ones that tell gives it)
// with timing t, and reports on the command. When tenure is the foreground
// process group of its terminal, the group becomes the terminal's
// foreground, as a shell does for a job, so that the command can read it.
func startGroup(path string, argv, env []string, t stopTiming, dl time.Time) (*group, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fail(exitError, "the guard's pipe: %v", err)
	}
	rr, rw, err := os.Pipe()
	if err != nil {
		r.Close()
		w.Close()
		return nil, fail(exitError, "the guard's pipe: %v", err)
	}
	g := &group{word: w, tty: foregroundTTY()}
	// The first deadline waits in the pipe: the guard reads it before it
	// starts the command.
	g.tell(dl)
	attr := &syscall.SysProcAttr{Setpgid: true}
	if g.tty != nil {
		// Once the group has the terminal, tenure is in the background:
		// SIGTTOU ignored, its notices still get out under "stty tostop",
		// and it may take the terminal back (tcsetpgrp) at the end. Set
		// before the guard starts; the guard catches it, so the command
		// gets it at its default, stopping, action.
		signal.Ignore(syscall.SIGTTOU)
		attr.Foreground, attr.Ctty = true, int(g.tty.Fd())
	}
	g.guard = guardCommand(path, argv, env, t, attr, r, rw)
	err = g.guard.Start()
	r.Close()
	rw.Close()
	if err != nil {
		w.Close()
		rr.Close()
		g.closeTTY()
		return nil, fail(exitNoExec, "starting the guard of the command: %v", err)
	}
	g.pgid = g.guard.Process.Pid
	g.reports = readReports(rr)
	g.changed = g.reports.changed
	exited := make(chan struct{})
	go func() {
		waitExited(g.pgid)
		close(exited)
	}()
	g.exited = exited
	return g, nil
}

// guardCommand is the guard's command line: tenure itself, with guardArg,
// the stop timing and the command; the pipes' guard ends as fds 3 and 4.
func guardCommand(path string, argv, env []string, t stopTiming, attr *syscall.SysProcAttr, word, report *os.File) *exec.Cmd {
	return &exec.Cmd{
		Path: "/proc/self/exe",
		Args: append([]string{"tenure", guardArg, strconv.FormatInt(int64(t.grace), 10),
			strconv.FormatInt(int64(t.killMargin), 10), path}, argv...),
		Env:         env,
		Stdin:       os.Stdin,
		Stdout:      os.Stdout,
		Stderr:      os.Stderr,
		ExtraFiles:  []*os.File{word, report},
		SysProcAttr: attr,
	}
}

// foregroundTTY opens tenure's controlling terminal if tenure's process
// group is its foreground one; otherwise it returns nil.
func foregroundTTY() *os.File {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil
	}
	pg, err := unix.IoctlGetUint32(int(tty.Fd()), unix.TIOCGPGRP)
	if err != nil || int(int32(pg)) != unix.Getpgrp() {
		tty.Close()
		return nil
	}
	return tty
}

// tell tells the guard the lease's local deadline dl, as CLOCK_BOOTTIME
// nanoseconds: the one clock both processes share that also counts time
// the machine spends suspended, as the lease's TTL on the Redis server
// does (CLOCK_MONOTONIC stops then). The clock is read before the time
// left, so the value errs early, never late.
// It returns the value told.
func (g *group) tell(dl time.Time) int64 {
	var now unix.Timespec
	v := int64(1) // no clock to tell it by: the guard stops the group at once
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &now) == nil {
		v = max(1, now.Nano()+int64(time.Until(dl)))
	}
	g.send(v)
	return v
}

// reached reports whether CLOCK_BOOTTIME has reached boot, a value that
// tell returned, less some time.
func (g *group) reached(boot int64) bool {
	var now unix.Timespec
	return unix.ClockGettime(unix.CLOCK_BOOTTIME, &now) != nil || now.Nano() >= boot
}

// term has the guard send the group SIGTERM, and SIGCONT so that a stopped
// command acts on it; directly, should the guard not take the word.
func (g *group) term() {
	if !g.send(termNow) {
		g.signal(syscall.SIGTERM)
		g.signal(syscall.SIGCONT)
	}
}

// send writes v to the word pipe without waiting: a guard that does not
// read (stopped along with its group) must not hold tenure up, and a
// deadline that does not reach it leaves it with an earlier one, so it
// errs early. A write of 8 bytes to a pipe is whole or nothing.
func (g *group) send(v int64) bool {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(v))
	rc, err := g.word.SyscallConn()
	if err != nil {
		return false
	}
	var (
		n    int
		werr error
	)
	if err := rc.Write(func(fd uintptr) bool {
		n, werr = unix.Write(int(fd), b[:])
		return true
	}); err != nil {
		return false
	}
	return werr == nil && n == len(b)
}

// signal sends s to the whole group.
func (g *group) signal(s syscall.Signal) { _ = syscall.Kill(-g.pgid, s) }

// stoppedBy is the signal that stopped the command, 0 while it runs.
func (g *group) stoppedBy() syscall.Signal {
	g.reports.mu.Lock()
	defer g.reports.mu.Unlock()
	return g.reports.stopped
}

// guardStopped reports whether the guard stopped the command by the
// deadline. Once exited is closed it waits for the guard's last report.
func (g *group) guardStopped() bool {
	select {
	case <-g.exited:
		<-g.reports.drained
	default:
	}
	g.reports.mu.Lock()
	defer g.reports.mu.Unlock()
	return g.reports.deadline
}

// refused reports whether the guard refused to start the command, its
// stop having come due by the deadline it was told (guardClock.begin).
// Call it once exited is closed: it waits for the guard's last report.
func (g *group) refused() bool {
	<-g.reports.drained
	g.reports.mu.Lock()
	defer g.reports.mu.Unlock()
	return g.reports.refused
}

// reap reaps the guard once exited is closed and returns the command's
// status (128+N when signal N killed it), and gives the terminal back to
// tenure's own process group if the command's group still has it.
func (g *group) reap() int {
	werr := g.guard.Wait()
	// Only now, with the guard gone, may the word pipe close: before, it
	// would tell the guard that tenure died.
	g.word.Close()
	g.giveBackTTY()
	<-g.reports.drained
	if code, ok := g.reports.exit(); ok {
		return code
	}
	// The guard died before it could report (killed, or it could not
	// start the command and said why in its status).
	return exitStatus(g.guard.ProcessState, werr)
}

// giveBackTTY makes tenure's process group the terminal's foreground
// again, as a shell does when a job ends, if the command's group still is.
// SIGTTOU is ignored (startGroup), which lets a background process do it.
func (g *group) giveBackTTY() {
	if g.tty == nil {
		return
	}
	fd := int(g.tty.Fd())
	if pg, err := unix.IoctlGetUint32(fd, unix.TIOCGPGRP); err == nil && int(int32(pg)) == g.pgid {
		_ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, unix.Getpgrp())
	}
	g.closeTTY()
}

func (g *group) closeTTY() {
	if g.tty != nil {
		g.tty.Close()
		g.tty = nil
	}
}

// reports is what the guard reported of the command: the latest state
// only, so that the reader never waits for supervise.
type reports struct {
	mu       sync.Mutex
	stopped  syscall.Signal
	code     int
	exited   bool
	deadline bool          // the guard stopped the group by the deadline
	refused  bool          // the guard did not start the command
	changed  chan struct{} // pokes, 1-buffered, when stopped changes
	drained  chan struct{} // closed at the pipe's end: the guard is gone
}

func readReports(r *os.File) *reports {
	rp := &reports{changed: make(chan struct{}, 1), drained: make(chan struct{})}
	go func() {
		defer close(rp.drained)
		defer r.Close()
		var b [2]byte
		for {
			if _, err := io.ReadFull(r, b[:]); err != nil {
				return
			}
			rp.take(b[0], b[1])
		}
	}()
	return rp
}

func (rp *reports) take(kind, v byte) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	switch kind {
	case reportStopped:
		rp.stopped = syscall.Signal(v)
	case reportContinued:
		rp.stopped = 0
	case reportExited:
		rp.code, rp.exited = int(v), true
		return
	case reportDeadline:
		rp.deadline = true
	case reportRefused:
		rp.refused = true
		return
	}
	select {
	case rp.changed <- struct{}{}:
	default:
	}
}

func (rp *reports) exit() (int, bool) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.code, rp.exited
}

// waitExited returns when process pid has exited, without reaping it: a
// zombie keeps its pid, and so its process group's id, from being reused,
// so tenure can still signal the group safely until it reaps the leader.
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// groupGone waits until no process of group pgid is alive (a zombie is
// dead: an orphan may wait for a reaper that a container lacks), polling,
// until at most until; it reports whether the group was seen gone.
func groupGone(pgid int, until time.Time) bool {
	for {
		if !groupAlive(pgid) {
			return true
		}
		if time.Now().After(until) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// groupAlive reports whether a process of group pgid is alive and not a
// zombie, from /proc.
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) == syscall.ESRCH {
		return false
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	want := strconv.Itoa(pgid)
	for _, p := range stats {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces and
		// parentheses, so the fields start after the last ')'.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) >= 3 && f[2] == want && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}
