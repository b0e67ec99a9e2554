package main

// A hold: "tenure run NAME" without COMMAND, which prints what it holds and
// holds it until a signal, the end of stdin or a loss.

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
	if cause := holdUntil(ctx, l, r.w.renewals(), killMargin(time.Duration(r.o.f.ttl))); cause != nil {
		return r.holdLost(l, cause)
	}
	return r.afterRelease(l, r.release(l), "as the hold ended", "as the hold ended", "during the hold", nil)
}

// holdUntil holds l until ctx ends (a signal) or stdin reaches its end,
// and returns nil; or until l ends (lost), or is about to for want of a
// renewal: no renewal (renewed pokes after each) has moved its local
// deadline by margin before it. It then returns the cause: the lease
// context's, or errNearDeadline.
func holdUntil(ctx context.Context, l *lease.Lease, renewed <-chan struct{}, margin time.Duration) error {
	stdin := stdinClosed(os.Stdin)
	timer := time.NewTimer(time.Until(l.Deadline().Add(-margin)))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-stdin:
			return nil
		case <-l.Done():
			return context.Cause(l.Context())
		case <-renewed:
			timer.Reset(time.Until(l.Deadline().Add(-margin)))
		case <-timer.C:
			if left := time.Until(l.Deadline().Add(-margin)); left > 0 {
				timer.Reset(left) // a renewal moved the deadline
				continue
			}
			return errNearDeadline
		}
	}
}

// holdLost ends a hold whose lease was lost, or is about to be for want
// of a renewal (errNearDeadline), with --lost-exit.
func (r *runner) holdLost(l *lease.Lease, cause error) error {
	r.releaseLost(l, true)
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
