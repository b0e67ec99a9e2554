package main

// The release that ends a run or a term: bounded by --release-timeout, or
// after a loss by the lease's local deadline, and the exit it makes when it
// finds the lease lost or goes unanswered.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// maxReleaseWait is the default --release-timeout for TTLs from 2s up.
const maxReleaseWait = 2 * time.Second

// releaseBound is the default --release-timeout: min(TTL, 2s). Waiting
// longer than the TTL gains nothing, since by then the key has expired on
// Redis whether or not the release arrived; and a release is one round
// trip, which a reachable server answers in milliseconds, so 2s is ample
// for it and short enough not to hold up the script that runs tenure when
// Redis is paused or cut off.
func releaseBound(ttl time.Duration) time.Duration { return min(ttl, maxReleaseWait) }

// release releases l, and says so when Redis did not answer in time.
func (r *runner) release(l *lease.Lease) error {
	r.unwatch()
	rerr := release(l, r.releaseTimeout)
	if !r.w.releaseAnswered() {
		reportUnanswered(r.stderr, r.name, releaseWithin(r.releaseTimeout), time.Duration(r.o.f.ttl))
	}
	return rerr
}

// releaseLost releases l after a loss, or after a stop for want of a
// renewal (r.releaseLost's function); dead says that nothing of the
// command runs any more, so that a revocation may be confirmed.
func (r *runner) releaseLost(l *lease.Lease, dead bool) {
	r.unwatch()
	var confirm func(context.Context) bool
	if dead {
		confirm = func(ctx context.Context) bool { return confirmRevoked(ctx, r.client, r.g.prefix, r.name, l.Token()) }
	}
	releaseLost(l, r.w, r.releaseTimeout, r.name, r.stderr, confirm)
}

// releaseLost releases l after a loss, or after a stop for want of a
// renewal: a courtesy, since a lost lease is no longer held and one about
// to be lost expires by its deadline. tenure's exit with --lost-exit is
// the word a script gets that the work under NAME ended, and it must come
// before the server could let another holder in: so the release is
// bounded by w.exitBy (when a hold gives NAME up, and a command's group
// is killed) as well as by timeout (--release-timeout), and once that has
// passed it ends the lease locally without a round trip.
//
// confirm, when not nil (the holder's work is dead: no command, or its
// group gone), then confirms a revocation by "tenure release --force"
// within the same bound (confirmRevoked), so that the name is free at
// once rather than at the old lease's TTL; w remembers that it was one.
func releaseLost(l *lease.Lease, w *leaseWatch, timeout time.Duration, name string, stderr io.Writer, confirm func(context.Context) bool) {
	bound := min(timeout, time.Until(w.exitBy(l)))
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	_ = l.Release(ctx)
	if confirm != nil && bound > 0 && confirm(ctx) {
		w.setRevoked(l)
	}
	if bound > 0 && !w.releaseAnswered() {
		within := releaseWithin(timeout)
		if bound < timeout {
			within = fmt.Sprintf("by %v before the lease's local deadline, past which tenure does not wait after a loss", killMargin(w.ttl))
		}
		reportUnanswered(stderr, name, within, w.ttl)
	}
}

// afterRelease turns the release's error rerr into tenure's exit: ok
// when NAME was held to the end, --lost-exit when the release found it
// lost (exited and ended name what had ended: the command, or the hold).
func (r *runner) afterRelease(l *lease.Lease, rerr error, exited, ended, during string, ok error) error {
	if errors.Is(rerr, lease.ErrLost) {
		// The work ran to its end, but the lease was found lost: another
		// holder may have acted meanwhile, so its success proves nothing.
		if info, found := r.w.ended(l, time.Second); found && info.Loss != "" {
			// Lost between the end and the release.
			return fail(r.o.f.lostExit, "%s was lost %s, before it was released: %s", r.how.held, exited, r.w.lossText(r.w.exitBy(l), info.Loss))
		}
		return fail(r.o.f.lostExit, "%s was found deleted or taken over by another holder when it was released, "+
			"%s: the server no longer had our token, so another holder may have held %q %s",
			r.how.held, ended, r.name, during)
	}
	if rerr != nil && r.w.releaseAnswered() && !errors.Is(rerr, lease.ErrNotHeld) {
		fmt.Fprintf(r.stderr, "tenure: releasing %q: %v; whether the lease was released is unknown: if it was not, it expires by its TTL (%v)\n",
			r.name, rerr, time.Duration(r.o.f.ttl))
	}
	return ok
}

// release releases l, waiting up to timeout. Whether Redis answered in
// time is the manager's hooks' to tell (leaseWatch.releaseAnswered), as
// for the release the election makes on its own.
func release(l *lease.Lease, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return l.Release(ctx)
}

// reportUnanswered says that a release went unanswered within what bounded
// it ("within --release-timeout 2s").
func reportUnanswered(stderr io.Writer, name, within string, ttl time.Duration) {
	fmt.Fprintf(stderr, "tenure: releasing %q: no reply from Redis %s; "+
		"whether the lease was released is unknown: if it was not, it expires by its TTL (%v)\n", name, within, ttl)
}

// releaseWithin is reportUnanswered's words for a release bounded by
// --release-timeout.
func releaseWithin(timeout time.Duration) string {
	return fmt.Sprintf("within --release-timeout %v", timeout)
}
