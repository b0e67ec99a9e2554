package main

// tenure's own signals while it runs or elects: passed on to the command's
// process group while one runs, ending the wait otherwise; SIGTSTP refused.

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwarded are the signals passed on to the command's process group.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// sigRouter receives tenure's signals: it forwards them to the command's
// process group while one runs, and otherwise cancels the wait. SIGTSTP
// (Ctrl-Z) it refuses, saying so: a stopped tenure could not renew its
// lease.
type sigRouter struct {
	ch      chan os.Signal
	mu      sync.Mutex
	pgid    int
	got     os.Signal
	cancel  context.CancelFunc
	done    chan struct{}
	refused chan struct{} // pokes the goroutine that says SIGTSTP was ignored
}

func newSigRouter(cancel context.CancelFunc, stderr io.Writer) *sigRouter {
	r := &sigRouter{ch: make(chan os.Signal, 8), cancel: cancel, done: make(chan struct{}), refused: make(chan struct{}, 1)}
	signal.Notify(r.ch, forwarded...)
	signal.Notify(r.ch, syscall.SIGTSTP)
	// A goroutine of its own: a stderr that blocks must not hold up the
	// signals that follow.
	go func() {
		for range r.refused {
			fmt.Fprintln(stderr, "tenure: SIGTSTP (Ctrl-Z) ignored: tenure does not stop, since a stopped tenure could not renew its lease")
		}
	}()
	go func() {
		defer close(r.done)
		for s := range r.ch {
			if s == syscall.SIGTSTP {
				select {
				case r.refused <- struct{}{}:
				default:
				}
				continue
			}
			r.route(s)
		}
	}()
	return r
}

// route forwards s to the command's group, or cancels the wait.
func (r *sigRouter) route(s os.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pgid > 0 {
		_ = syscall.Kill(-r.pgid, s.(syscall.Signal))
	} else if r.got == nil {
		r.got = s
		r.cancel()
	}
}

func (r *sigRouter) setChild(pgid int) {
	r.mu.Lock()
	r.pgid = pgid
	r.mu.Unlock()
}

// interrupted returns the signal that cancelled the wait, if any.
func (r *sigRouter) interrupted() (os.Signal, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got, r.got != nil
}

func (r *sigRouter) stop() {
	signal.Stop(r.ch)
	close(r.ch)
	<-r.done
	close(r.refused)
}

// signalName is s as its constant is spelt ("SIGINT"), for messages:
// os.Signal's String ("interrupt") reads oddly after "interrupted by".
func signalName(s os.Signal) string {
	if n, ok := s.(syscall.Signal); ok {
		if name := unix.SignalName(n); name != "" {
			return name
		}
	}
	return s.String()
}

// signalStatus is 128+N for signal N.
func signalStatus(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return exitError
}
