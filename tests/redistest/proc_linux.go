//go:build linux

package redistest

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// sysProcAttr puts the server in its own process group (so terminal signals
// aimed at the test binary do not reach it, and we can signal its forks too)
// and asks the kernel to SIGKILL it when the parent dies, so a crashed or
// timed-out test binary does not leave redis-server processes behind.
//
// Pdeathsig fires when the OS thread that forked the child exits, not only
// when the whole process does. The Go runtime only retires threads when a
// goroutine exits while locked with runtime.LockOSThread, which this package
// never does around a start, so in practice it means "when the test binary
// dies".
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// waitStopped waits (up to timeout) until /proc reports pid as stopped, since
// SIGSTOP is delivered asynchronously: without this a command sent right after
// Pause could still be served.
func waitStopped(pid int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	for time.Now().Before(deadline) {
		data, err := os.ReadFile(path)
		if err != nil {
			return
		}
		// The state follows the parenthesised command name, which may
		// itself contain spaces or parentheses.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 || i+2 >= len(data) {
			return
		}
		if st := data[i+2]; st == 'T' || st == 't' || st == 'Z' || st == 'X' {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
