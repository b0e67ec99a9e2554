package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/tenure-go/tenure/lease"
)

// acquiredLine is the line "tenure run NAME" (a hold) prints on stdout
// once it holds NAME: one JSON object, so that a script reads it with jq
// or any JSON parser, whatever NAME and the holder identity hold.
type acquiredLine struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"` // "lease", "read lock" or "permit"
	Fence  int64  `json:"fence"`
	Holder string `json:"holder"`
}

// hold keeps l without a command: it prints what it holds, then waits
// for a signal (ctx, cancelled by the signal router), the end of stdin,
// or the lease's end, and releases. A signal or stdin's end is success;
// a loss is --lost-exit, with why.
func (r *runner) hold(ctx context.Context, l *lease.Lease) error {
	line, _ := json.Marshal(acquiredLine{Name: r.name, Kind: r.how.kind, Fence: l.Fence(), Holder: r.o.holder})
	fmt.Fprintf(r.stdout, "%s\n", line)
	select {
	case <-ctx.Done():
	case <-stdinClosed(os.Stdin):
	case <-l.Done():
		cause := context.Cause(l.Context())
		_ = r.release(l)
		return fail(r.o.f.lostExit, "%s was lost while held: %s", r.how.held, r.w.why(l, cause))
	}
	return r.afterRelease(l, r.release(l), "as the hold ended", "as the hold ended", "during the hold", nil)
}

// stdinClosed returns a channel closed when in reaches its end (or fails).
// What it reads is discarded. The goroutine that reads lives on while in
// stays open, until tenure exits. A terminal is not read, and the channel
// never closes: a hold in a shell's background would be stopped by
// SIGTTIN for reading it (and a stopped tenure cannot renew); Ctrl-C ends
// a hold in the foreground.
func stdinClosed(in *os.File) <-chan struct{} {
	done := make(chan struct{})
	if isTerminal(in) {
		return done
	}
	go func() {
		_, _ = io.Copy(io.Discard, in)
		close(done)
	}()
	return done
}
