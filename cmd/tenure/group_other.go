//go:build !linux

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// Outside Linux there is no guard: the command is the leader of its own
// process group, which tenure stops by the lease's deadline and sweeps when
// the command exits, but nothing stops it if tenure itself is killed.

// group is a command's running process group.
type group struct {
	pgid   int
	exited <-chan struct{} // closed when the command has exited (and been reaped)
	reap   func() int      // the command's exit status, once exited is closed
}

// startGroup runs path with argv and env as the leader of a new group.
func startGroup(path string, argv, env []string) (*group, error) {
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
	var code int
	go func() {
		// Reaped here, so the sweep that follows could in theory hit a
		// new group that reused the pid; without waitid's WNOWAIT in
		// package syscall there is no portable way to wait unreaped.
		err := c.Wait()
		code = exitStatus(c.ProcessState, err)
		close(exited)
	}()
	return &group{pgid: c.Process.Pid, exited: exited, reap: func() int { return code }}, nil
}
