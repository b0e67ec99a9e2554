//go:build unix

package redistest

import (
	"os"
	"syscall"
)

// signalProcess delivers sig to the whole process group led by p. Servers are
// started with Setpgid, so the group also contains any child redis forks for
// BGSAVE or an AOF rewrite: pausing or killing only the parent would leave such
// a child running (and writing into the temp dir) behind the test's back.
func signalProcess(p *os.Process, sig procSignal) error {
	var s syscall.Signal
	switch sig {
	case sigStop:
		s = syscall.SIGSTOP
	case sigCont:
		s = syscall.SIGCONT
	default:
		s = syscall.SIGKILL
	}
	if err := syscall.Kill(-p.Pid, s); err != nil {
		// The group may already be gone (ESRCH) while the leader is a zombie
		// not yet reaped; fall back to the single process.
		return p.Signal(s)
	}
	return nil
}
