package backend

import (
	"time"
)

// The fake's fair queue of a name: queue.lua's two sorted sets (P{N}:queue
// by arrival, P{N}:queue:expiry by when each waiter is forgotten) kept as
// one map of waiters. A fair request of k permits is k members of the
// Redis queue with one arrival and one expiry, which always come and go
// together: here it is one waiter of weight k, and every count of the
// queue (ZCARD, ZRANK) counts weights.

// fakeWaiter is one fair request waiting in a name's queue.
type fakeWaiter struct {
	arrival int64     // when it joined (us): the queue's order
	k       int       // its members: the permits it asks for (1 for a lease)
	forget  time.Time // when it is forgotten unless it asks again
}

// fakeQueue is a name's waiters by token.
type fakeQueue map[string]fakeWaiter

// forgetGone drops the name's waiters whose time has come, as
// forget_gone() does, and the queue with the last of them.
func (f *Fake) forgetGone(name string, now time.Time) {
	q := f.queues[name]
	for tok, w := range q {
		if !now.Before(w.forget) {
			delete(q, tok)
		}
	}
	if len(q) == 0 {
		delete(f.queues, name)
	}
}

// queued reports whether the name has a queue (Redis: EXISTS P{N}:queue).
func (f *Fake) queued(name string) bool { return len(f.queues[name]) > 0 }

// before reports whether waiter a (token ta) is ahead of b (token tb): by
// arrival, then by token, as a sorted set orders equal scores.
func before(a fakeWaiter, ta string, b fakeWaiter, tb string) bool {
	if a.arrival != b.arrival {
		return a.arrival < b.arrival
	}
	return ta < tb
}

// head returns the token at the head of the name's queue, or "".
func (f *Fake) head(name string) string {
	var (
		first string
		fw    fakeWaiter
	)
	for tok, w := range f.queues[name] {
		if first == "" || before(w, tok, fw, first) {
			first, fw = tok, w
		}
	}
	return first
}

// size is how many members the name's queue has (ZCARD).
func (f *Fake) size(name string) int {
	n := 0
	for _, w := range f.queues[name] {
		n += w.k
	}
	return n
}

// rank returns how many members are ahead of token in the name's queue
// (ZRANK), and whether token is in it.
func (f *Fake) rank(name, token string) (int, bool) {
	q := f.queues[name]
	mine, ok := q[token]
	if !ok {
		return 0, false
	}
	ahead := 0
	for tok, w := range q {
		if before(w, tok, mine, token) {
			ahead += w.k
		}
	}
	return ahead, true
}

// join puts token in the name's queue as a waiter of k members, keeping
// its first arrival if it is there already, and sets when it is forgotten,
// as join() does. It returns the arrival. Arrivals increase strictly
// across the server: under testing/synctest the clock stands still while
// goroutines run, and two waiters joining at one instant must still be
// served in the order they came, as Redis's clock, which moves between
// two scripts, serves them.
func (f *Fake) join(name, token string, k int, patience time.Duration, now time.Time) int64 {
	q := f.queues[name]
	if q == nil {
		q = fakeQueue{}
		f.queues[name] = q
	}
	w, ok := q[token]
	if !ok {
		w = fakeWaiter{arrival: max(now.UnixMicro(), f.lastArrival+1), k: max(k, 1)}
		f.lastArrival = w.arrival
	}
	w.forget = now.Add(patience)
	q[token] = w
	return w.arrival
}

// forgetWaiter takes token's members out of the name's queue (leave.lua,
// abandon.lua, a grant) and reports whether it was there.
func (f *Fake) forgetWaiter(name, token string) bool {
	q := f.queues[name]
	if _, ok := q[token]; !ok {
		return false
	}
	delete(q, token)
	if len(q) == 0 {
		delete(f.queues, name)
	}
	return true
}

// headWait is how long a request must wait for the name, free but promised
// to head, the head of its queue: until head is forgotten.
func (f *Fake) headWait(name, head string, now time.Time) time.Duration {
	w, ok := f.queues[name][head]
	if !ok {
		return 0
	}
	return max(0, w.forget.Sub(now))
}
