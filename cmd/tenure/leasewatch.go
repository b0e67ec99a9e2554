package main

// What tenure keeps of its leases from the manager's hooks: -v's log
// records, the renewals that move the local deadline, the last failed
// renewal's error, how each lease ended, and the words for a loss.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/watchdog"
)

// leaseWatch receives a manager's hooks: it logs what the leases do (shown
// with -v) and keeps how each one ended, since a lease's context says only
// that it was lost (lease.ErrLost), not why, and tenure always says why.
type leaseWatch struct {
	log *slog.Logger
	ttl time.Duration
	// permit: the leases are a semaphore's permits, whose losses read
	// differently (a permit leaves a set; the key stays).
	permit bool

	mu   sync.Mutex
	ends map[*lease.Lease]*leaseEnd
	// releasing are the leases whose release has started: a renewal that
	// ends after it (one in flight, or retried while Redis is down) is
	// no news, and -v says nothing of it.
	releasing map[*lease.Lease]bool
	// revoked are the leases found revoked by "tenure release --force"
	// (a confirmation found their token in the marker: releaseLost).
	revoked map[*lease.Lease]bool
	// unanswered: a release ended with an error that leaves its outcome
	// unknown (a timeout, a dropped connection): the election releases
	// on its own, and this is how tenure hears of it.
	unanswered bool

	// renewed pokes (1-buffered, never blocking) after each successful
	// renewal: supervise then tells the guard the new deadline.
	renewed chan struct{}

	// renewErr is the error of the last renewal that failed, if any:
	// why a lease that Redis did not renew in time was lost.
	renewErr error

	// probe, when set, sends Redis one request (a PING) and returns its
	// error: a renewal that timed out hides why (connection refused, i/o
	// timeout, ...), which a fresh request shows. It runs once, in the
	// background, from the first renewal that failed (startProbe), so
	// that its answer is there when a message needs it, without the
	// message waiting up to probeTimeout on an unreachable Redis: the
	// last renewal before a deadline often ends by its context, while
	// the earlier ones met the cause.
	probe     func(context.Context) error
	probeOnce sync.Once
	probeDone chan struct{} // closed once probed is set
	probed    error
}

// probeTimeout bounds the probe that looks for why renewals timed out.
const probeTimeout = time.Second

// startProbe starts the probe, once; the first renewal that fails calls
// it. It does not wait.
func (w *leaseWatch) startProbe() {
	w.probeOnce.Do(func() {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
			defer cancel()
			w.probed = w.probe(ctx)
			close(w.probeDone)
		}()
	})
}

// lastRenewError returns the last failed renewal's error, nil if none.
// When that error is only a timeout, it adds what the probe met, when
// that failed too; it waits for the probe's answer until by at most, and
// goes without it after that.
func (w *leaseWatch) lastRenewError(by time.Time) error {
	w.mu.Lock()
	last := w.renewErr
	w.mu.Unlock()
	if last == nil || !unanswered(last) || w.probe == nil {
		return last
	}
	w.startProbe()
	t := time.NewTimer(max(0, time.Until(by)))
	defer t.Stop()
	select {
	case <-w.probeDone:
	case <-t.C:
		select {
		case <-w.probeDone:
		default:
			return last // no answer in time
		}
	}
	if w.probed == nil || unanswered(w.probed) {
		return last // the PING timed out too: nothing more to say
	}
	return fmt.Errorf("%w; a PING sent meanwhile: %v", last, w.probed)
}

// exitBy is when tenure must be done with l after a loss, or a stop for
// want of a renewal: killMargin before its local deadline, when a
// command's group is killed and a hold gives NAME up, so that tenure has
// exited by the deadline itself. Nothing it waits for on Redis (the
// probe, the release) may keep it past this.
func (w *leaseWatch) exitBy(l *lease.Lease) time.Time {
	return l.Deadline().Add(-killMargin(w.ttl))
}

// renewErrorOf is lastRenewError for messages about l, bounded by exitBy.
func (w *leaseWatch) renewErrorOf(l *lease.Lease) func() error {
	return func() error { return w.lastRenewError(w.exitBy(l)) }
}

// renewals pokes after successful renewals, many coalesced into one.
func (w *leaseWatch) renewals() <-chan struct{} { return w.renewed }

// unanswered reports whether a renewal's or release's error leaves its
// outcome unknown: Redis did not answer in time, or, for a renewal, had not
// answered yet when the watchdog last said (watchdog.ErrUnanswered, which
// since the watchdog sends a second attempt sooner is often the last word
// on a renewal to a dead server).
func unanswered(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, watchdog.ErrUnanswered) ||
		errors.As(err, &ne) && ne.Timeout()
}

// releaseAnswered reports whether every release so far was answered by
// Redis (done, or "not held").
func (w *leaseWatch) releaseAnswered() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.unanswered
}

// leaseEnd is how a lease ended; done is closed once info is set.
type leaseEnd struct {
	done chan struct{}
	info lease.EndInfo
}

func newLeaseWatch(log *slog.Logger, ttl time.Duration) *leaseWatch {
	return &leaseWatch{log: log, ttl: ttl, ends: map[*lease.Lease]*leaseEnd{}, renewed: make(chan struct{}, 1),
		probeDone: make(chan struct{})}
}

func (w *leaseWatch) end(l *lease.Lease) *leaseEnd {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.ends[l]
	if e == nil {
		e = &leaseEnd{done: make(chan struct{})}
		w.ends[l] = e
	}
	return e
}

// hooks are the manager's hooks. They only queue log records and record
// ends: they run on the watchdog's goroutines and must not block.
func (w *leaseWatch) hooks() lease.Hooks {
	return lease.Hooks{
		AcquireDone: func(_ context.Context, info lease.AcquireInfo) {
			if info.Lease == nil {
				w.log.Debug("not acquired", "name", info.Name, "attempts", info.Attempts, "error", info.Err)
				return
			}
			w.log.Info("acquired", "name", info.Name, "fence", info.Lease.Fence(), "ttl", w.ttl,
				"waited", info.Waited.Round(time.Millisecond), "attempts", info.Attempts)
		},
		Renewed: w.renewedHook,
		ReleaseStart: func(ctx context.Context, l *lease.Lease) context.Context {
			w.mu.Lock()
			if w.releasing == nil {
				w.releasing = map[*lease.Lease]bool{}
			}
			w.releasing[l] = true
			w.mu.Unlock()
			return ctx
		},
		ReleaseDone: w.releaseDoneHook,
		Ended:       w.endedHook,
	}
}

// renewedHook is the Renewed hook: a failure is kept for the loss's
// message (and starts the probe); a success pokes supervise.
func (w *leaseWatch) renewedHook(l *lease.Lease, err error) {
	w.mu.Lock()
	released := w.releasing[l]
	w.mu.Unlock()
	if released {
		return
	}
	left := time.Until(l.Deadline()).Round(time.Millisecond)
	if err != nil {
		w.mu.Lock()
		w.renewErr = err
		w.mu.Unlock()
		if w.probe != nil {
			w.startProbe()
		}
		w.log.Warn("renewal failed; retrying until the local deadline", "name", l.Name(), "fence", l.Fence(),
			"deadline_in", left, "error", err)
		return
	}
	select {
	case w.renewed <- struct{}{}:
	default:
	}
	w.log.Debug("renewed", "name", l.Name(), "fence", l.Fence(), "deadline_in", left)
}

// releaseDoneHook is the ReleaseDone hook.
func (w *leaseWatch) releaseDoneHook(ctx context.Context, l *lease.Lease, err error) {
	// The release's own context ran out (the election's bound, for
	// one): Redis did not answer, whatever Release reports of a lease
	// already lost.
	if ctx.Err() != nil || unanswered(err) {
		w.mu.Lock()
		w.unanswered = true
		w.mu.Unlock()
	}
	if err != nil {
		w.log.Warn("release failed", "name", l.Name(), "fence", l.Fence(), "error", err)
		return
	}
	w.log.Info("released", "name", l.Name(), "fence", l.Fence())
}

// endedHook is the Ended hook: it records how l ended, for why.
func (w *leaseWatch) endedHook(l *lease.Lease, info lease.EndInfo) {
	e := w.end(l)
	e.info = info
	close(e.done)
	if info.Loss != "" {
		w.log.Warn("lease lost", "name", l.Name(), "fence", l.Fence(), "reason", string(info.Loss),
			"why", w.lossText(time.Time{}, info.Loss), "held", info.Held.Round(time.Millisecond))
		return
	}
	w.log.Debug("lease ended", "name", l.Name(), "fence", l.Fence(), "cause", info.Cause,
		"held", info.Held.Round(time.Millisecond))
}

// ended returns how l ended, waiting up to wait for the Ended hook: the
// lease cancels its context just before it calls the hook.
func (w *leaseWatch) ended(l *lease.Lease, wait time.Duration) (lease.EndInfo, bool) {
	e := w.end(l)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-e.done:
		return e.info, true
	case <-t.C:
		return lease.EndInfo{}, false
	}
}

// setRevoked remembers that l was revoked by "tenure release --force".
func (w *leaseWatch) setRevoked(l *lease.Lease) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.revoked == nil {
		w.revoked = map[*lease.Lease]bool{}
	}
	w.revoked[l] = true
}

// revokedText is why's words for a lease that release --force revoked.
const revokedText = `"tenure release --force" revoked it; once its command was dead, tenure confirmed it, which freed the name`

// why says, in words, why a command under l was stopped: cause is the
// context's cause that supervise returned, or errNearDeadline.
func (w *leaseWatch) why(l *lease.Lease, cause error) string {
	w.mu.Lock()
	revoked := w.revoked[l]
	w.mu.Unlock()
	if revoked && errors.Is(cause, lease.ErrLost) {
		return revokedText
	}
	if errors.Is(cause, lease.ErrLost) {
		if info, ok := w.ended(l, time.Second); ok && info.Loss != "" {
			return w.lossText(w.exitBy(l), info.Loss)
		}
	}
	if errors.Is(cause, errNearDeadline) {
		return bare(cause) + renewFailure(w.lastRenewError(w.exitBy(l)))
	}
	return bare(cause)
}

// lossText is lossText, or permitLossText for a semaphore's permits; a
// loss by the local deadline names the last renewal's error, with the
// probe's answer if it comes by by (the hooks pass a zero by: they must
// not block).
func (w *leaseWatch) lossText(by time.Time, r lease.LossReason) string {
	if r == lease.LossExpired {
		return lossText(r) + renewFailure(w.lastRenewError(by))
	}
	if w.permit {
		return permitLossText(r)
	}
	return lossText(r)
}

// permitLossText is the reason of a permit's loss: renew.lua reports a
// permit gone from the set (or past its expiry) as deleted, and a key of
// another kind at the name as taken over.
func permitLossText(r lease.LossReason) string {
	switch r {
	case lease.LossDeleted:
		return "its permit was removed from the semaphore, or expired on the server (the server no longer has it)"
	case lease.LossTakenOver:
		return "the name was taken over by another kind of holder, or revoked by \"tenure release --force\" " +
			"(the server holds a lease, a lock or a revocation there, not permits)"
	}
	return lossText(r)
}

// lossText is the reason of a loss, for the messages tenure prints.
func lossText(r lease.LossReason) string {
	switch r {
	case lease.LossDeleted:
		return "its key was deleted, or expired on the server (the server no longer has it)"
	case lease.LossTakenOver:
		return "it was taken over by another holder, or revoked by \"tenure release --force\" (the server holds another token)"
	case lease.LossExpired:
		return "Redis did not confirm a renewal before the lease's local deadline (unreachable, slow or paused)"
	}
	return "lost (" + string(r) + ")"
}
