//go:build linux

package pgtest

import "syscall"

// sysProcAttr puts the postmaster in a process group of its own, which its
// backends inherit, so that Stop can kill them all, and asks the kernel to
// SIGKILL it if the test binary dies. Go sets the death signal after
// switching to the postgres user, so the switch does not clear it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
