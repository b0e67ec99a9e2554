package watchdog

import (
	"sync"
	"time"
)

// The round trips: what the attempts learn of the link, and the two
// estimates drawn from it. Neither decides a loss.
//
//   - patience is how long a second attempt waits for the first (twice
//     it, at least half an interval): the longest round trip answered
//     lately, rising at once and falling by eighths, raised to the wait of
//     an attempt given up at its limit (not of one cancelled because the
//     other attempt answered: attempt.go's observe). A link that just slowed down must not see its
//     renewals sent twice for round trips it already showed it takes.
//   - floor is the quickest round trip answered in the last two windows of
//     floorWindow: the least a renewal sent now can be expected to take.
//     A lease is shed while the watchdog is behind only if its loss is
//     nearer than that (shed.go), and since a server that answers at once
//     again answers at once in the floor, a stall that ended does not make
//     a lease hopeless, however long the stalled attempt took.
//
// Only attempts that were answered for every renewal, or given up at their
// deadline, count: one that failed at once for a node that refused the
// connection says nothing of the round trip.
type roundTrips struct {
	mu       sync.Mutex
	patience time.Duration
	// The quickest answer of the current window, which began at
	// windowAt, and of the one before (0: none).
	quickest, previous time.Duration
	windowAt           int64
	// The answer for the fewest renewals, in the same two windows (n 0:
	// none): what capacity.go tells the link's share of a round trip by.
	smallest, smallestBefore sized
}

// sized is an answered attempt: how many renewals it carried, and how long
// it took.
type sized struct {
	n    int
	took time.Duration
}

// floorWindow is the span of one window of the floor: long enough to hold
// a few answers on a quiet watchdog, short enough that a link that became
// slow for good is believed within seconds.
const floorWindow = time.Second

// observe counts an attempt of n renewals sent at sent (nanoseconds since
// base) that took took, or at least took when it was given up at its
// deadline.
func (r *roundTrips) observe(sent int64, took time.Duration, gaveUp bool, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case gaveUp:
		r.patience = max(r.patience, took)
		return // no answer: the floor is what answers took
	case took > r.patience:
		r.patience = took
	default:
		r.patience += (took - r.patience) / 8
	}
	r.rotate(sent + int64(took))
	if r.quickest == 0 || took < r.quickest {
		r.quickest = max(took, 1)
	}
	if s := r.smallest; s.n == 0 || n < s.n || n == s.n && took < s.took {
		r.smallest = sized{n: n, took: took}
	}
}

// rotate starts a new window of the floor if now is past the current one.
func (r *roundTrips) rotate(now int64) {
	switch {
	case now < r.windowAt+int64(floorWindow):
	case now < r.windowAt+2*int64(floorWindow):
		r.previous, r.quickest, r.windowAt = r.quickest, 0, r.windowAt+int64(floorWindow)
		r.smallestBefore, r.smallest = r.smallest, sized{}
	default:
		r.previous, r.quickest, r.windowAt = 0, 0, now
		r.smallestBefore, r.smallest = sized{}, sized{}
	}
}

// cutoff is the longest round trip seen lately: a lease whose loss is
// nearer goes in a batch of its own kind, and a second attempt waits twice
// it (attempt.go's take).
func (r *roundTrips) cutoff() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.patience
}

// floor is the quickest round trip answered in the last two windows at
// now, 0 when none was.
func (r *roundTrips) floor(now int64) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rotate(now)
	switch {
	case r.quickest == 0:
		return r.previous
	case r.previous == 0:
		return r.quickest
	}
	return min(r.quickest, r.previous)
}

// fewest is the answer for the fewest renewals in the last two windows at
// now (n 0: none).
func (r *roundTrips) fewest(now int64) sized {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rotate(now)
	a, b := r.smallest, r.smallestBefore
	if a.n == 0 || b.n != 0 && (b.n < a.n || b.n == a.n && b.took < a.took) {
		return b
	}
	return a
}
