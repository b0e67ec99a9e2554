//go:build unix && !linux

package redistest

import (
	"syscall"
	"time"
)

// sysProcAttr puts the server in its own process group. There is no
// parent-death signal outside Linux, so a crashed test binary can leave a
// server behind there; Stop and tb.Cleanup still kill it in the normal case.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitStopped is a no-op without /proc; SIGSTOP delivery is near-immediate.
func waitStopped(int, time.Duration) {}
