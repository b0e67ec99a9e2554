package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

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
//
// A hold runs nothing, so its exit is what a script relying on it
// watches: it must come before the server could let another holder in.
// So the hold gives NAME up killMargin before the local deadline, as a
// command's group is killed then, unless a renewal has moved it; and on
// a loss it does not wait on Redis past that (releaseLost).
func (r *runner) hold(ctx context.Context, l *lease.Lease) error {
	line, _ := json.Marshal(acquiredLine{Name: r.name, Kind: r.how.kind, Fence: l.Fence(), Holder: r.o.holder})
	fmt.Fprintf(r.stdout, "%s\n", line)
	stdin := stdinClosed(os.Stdin)
	margin := killMargin(time.Duration(r.o.f.ttl))
	timer := time.NewTimer(time.Until(l.Deadline().Add(-margin)))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
		case <-stdin:
		case <-l.Done():
			return r.holdLost(l, context.Cause(l.Context()))
		case <-r.w.renewals():
			timer.Reset(time.Until(l.Deadline().Add(-margin)))
			continue
		case <-timer.C:
			if left := time.Until(l.Deadline().Add(-margin)); left > 0 {
				timer.Reset(left) // a renewal moved the deadline
				continue
			}
			return r.holdLost(l, errNearDeadline)
		}
		return r.afterRelease(l, r.release(l), "as the hold ended", "as the hold ended", "during the hold", nil)
	}
}

// holdLost ends a hold whose lease was lost, or is about to be for want
// of a renewal (errNearDeadline), with --lost-exit.
func (r *runner) holdLost(l *lease.Lease, cause error) error {
	r.releaseLost(l)
	return fail(r.o.f.lostExit, "%s was lost while held: %s", r.how.held, r.w.why(l, cause))
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
