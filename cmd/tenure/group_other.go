//go:build !linux

package main

// A command's process group, elsewhere than on Linux (group_linux.go).
// Outside Linux there is no guard: the command is the leader of its own
// process group, which tenure stops by the lease's deadline and sweeps when
// the command exits, but nothing stops it if tenure itself is killed,
// stopped or starved of CPU; nor does tenure watch the command's stops, or
// give it the terminal.

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// group is a command's running process group.
type group struct {
	pgid    int
	exited  <-chan struct{} // closed when the command has exited (and been reaped)
	changed <-chan struct{} // nil: stops are not watched here
	code    int             // the command's exit status, once exited is closed
}

// startGroup runs path with argv and env as the leader of a new group.
func startGroup(path string, argv, env []string, _ stopTiming, _ time.Time) (*group, error) {
	c := &exec.Cmd{
		Path:        path,
		Args:        argv,
		Env:         env,
		Stdin:       os.Stdin,
		Stdout:      os.Stdout,
		Stderr:      os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := c.Start(); err != nil {
		return nil, execFailure(err)
	}
	exited := make(chan struct{})
	g := &group{pgid: c.Process.Pid, exited: exited}
	go func() {
		// Reaped here, so the sweep that follows could in theory hit a
		// new group that reused the pid; without waitid's WNOWAIT in
		// package syscall there is no portable way to wait unreaped.
		err := c.Wait()
		g.code = exitStatus(c.ProcessState, err)
		close(exited)
	}()
	return g, nil
}

// tell does nothing: there is no guard to tell the deadline.
func (g *group) tell(time.Time) int64 { return 0 }

// reached is never asked: there is no guard to make a stop of its own.
func (g *group) reached(int64) bool { return false }

// term sends the group SIGTERM, and SIGCONT so that a stopped command acts
// on it.
func (g *group) term() {
	g.signal(syscall.SIGTERM)
	g.signal(syscall.SIGCONT)
}

// signal sends s to the whole group.
func (g *group) signal(s syscall.Signal) { _ = syscall.Kill(-g.pgid, s) }

// stoppedBy is always 0: stops are not watched here.
func (g *group) stoppedBy() syscall.Signal { return 0 }

// guardStopped is always false: there is no guard.
func (g *group) guardStopped() bool { return false }

// refused is always false: there is no guard to refuse.
func (g *group) refused() bool { return false }

// reap returns the command's status once exited is closed.
func (g *group) reap() int { return g.code }

// groupGone waits until group pgid has no process left (kill(-pgid, 0)
// fails), polling, until at most until; it reports whether it was seen
// gone. Zombies count as alive here: without /proc there is no telling.
func groupGone(pgid int, until time.Time) bool {
	for {
		if syscall.Kill(-pgid, 0) == syscall.ESRCH {
			return true
		}
		if time.Now().After(until) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}
