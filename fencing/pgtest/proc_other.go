//go:build unix && !linux

package pgtest

import "syscall"

// sysProcAttr puts the postmaster in a process group of its own, which its
// backends inherit, so that Stop can kill them all.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
