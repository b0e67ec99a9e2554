package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"unsafe"
)

// On Linux a command runs under a guard: tenure starts itself again
// (/proc/self/exe, so a binary replaced on disk meanwhile does not matter)
// with guardArg, as the leader of a new process group, and the guard runs
// the command in that group. The guard holds the read end of a pipe whose
// only write end is tenure's; when tenure dies in any way (SIGKILL, the
// OOM killer, a crash) the kernel closes that end, the guard's read returns,
// and the guard SIGKILLs its whole group, the command's descendants
// included. A pipe rather than Pdeathsig alone: Pdeathsig fires when the
// forking OS thread exits, not the process, and would kill the guard
// before it could kill the group.
//
// The guard is in the group it guards, so tenure's signals to the group
// (forwarded ones, SIGTERM, SIGKILL) reach it too: it catches the
// forwarded ones and lets them go, and dies with the rest on SIGKILL.
const guardArg = "__tenure-guard"

// guardFD is the death pipe's read end in the guard (ExtraFiles[0]).
const guardFD = 3

// The guard runs from init, not main: during init the main goroutine is
// locked to the process's main thread, which the guard keeps (it never
// returns), so that its name is the one ps shows and the thread its
// Pdeathsig hangs on lives as long as the process.
func init() {
	if len(os.Args) > 1 && os.Args[1] == guardArg {
		runtime.LockOSThread()
		os.Exit(guardMain(os.Args[2:]))
	}
}

// group is a command's running process group.
type group struct {
	pgid   int
	exited <-chan struct{} // closed when the group's leader has exited, before it is reaped
	reap   func() int      // the command's exit status, once exited is closed
}

// startGroup starts the guard, which runs path with argv and env.
func startGroup(path string, argv, env []string) (*group, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fail(exitError, "the guard's pipe: %v", err)
	}
	c := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        append([]string{"tenure", guardArg, path}, argv...),
		Env:         env,
		Stdin:       os.Stdin,
		Stdout:      os.Stdout,
		Stderr:      os.Stderr,
		ExtraFiles:  []*os.File{r},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	err = c.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fail(exitNoExec, "starting the guard of the command: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		waitExited(c.Process.Pid)
		close(exited)
	}()
	return &group{
		pgid:   c.Process.Pid,
		exited: exited,
		reap: func() int {
			werr := c.Wait()
			// Only now, with the guard gone, may the pipe close: before, it
			// would tell the guard that tenure died. Keeping w referenced
			// until here also keeps its finalizer from closing it.
			w.Close()
			return exitStatus(c.ProcessState, werr)
		},
	}, nil
}

// waitExited returns when process pid has exited, without reaping it: a
// zombie keeps its pid, and so its process group's id, from being reused,
// so tenure can still signal the group safely until it reaps the leader.
func waitExited(pid int) {
	const wnowait = 0x1000000 // WNOWAIT, missing from package syscall
	var info [128]byte        // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, 1 /* P_PID */, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|wnowait, 0, 0)
		if e != syscall.EINTR {
			return
		}
	}
}

// guardMain is the guard: args are the command's path and argv. It
// returns the command's status (128+N when signal N killed it).
func guardMain(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "tenure: "+guardArg+" is tenure's own, not a command")
		return exitUsage
	}
	// The group's signals are meant for the command; the guard only has to
	// survive them. Notify, not Ignore: an ignored signal would stay
	// ignored in the command across exec.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	go func() {
		for range sigs {
		}
	}()

	death := os.NewFile(guardFD, "tenure")
	syscall.CloseOnExec(guardFD)
	go func() {
		_, _ = io.Copy(io.Discard, death)
		// tenure is gone: so must the whole group be, the guard too.
		_ = syscall.Kill(0, syscall.SIGKILL)
	}()

	// "exe" (of /proc/self/exe) would tell an operator nothing.
	name := []byte("tenure-guard\x00")
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0)

	// Should the guard itself be killed alone, Pdeathsig takes the command
	// with it (not its descendants). It fires when the forking thread
	// exits: this is the main thread (see init).
	c := &exec.Cmd{
		Path:        args[0],
		Args:        args[1:],
		Stdin:       os.Stdin,
		Stdout:      os.Stdout,
		Stderr:      os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	}
	if err := c.Start(); err != nil {
		// As tenure itself reports it, since tenure cannot tell this
		// status from the command's own.
		xe := execFailure(err)
		fmt.Fprintln(os.Stderr, "tenure:", oneLine(xe.err.Error()))
		return xe.code
	}
	err := c.Wait()
	return exitStatus(c.ProcessState, err)
}
