package lease

import (
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/pubsub"
)

// notifier wakes waiters when the names they wait for are released: one
// pub/sub connection per manager serves every waiter (docs/design.md
// section 5), or on a Cluster one per primary that owns a channel waited
// on (internal/pubsub's sharded mode). It subscribes to a name's channel
// while someone waits for it.
//
// A message wakes one barging waiter of the manager: it tries, and wins
// unless a waiter elsewhere was quicker, in which case the name is held
// again and everyone keeps waiting for its next release. Waking them all
// would only have them all try and all but one fail. One per kind of
// request, rather: permit requests with different limits do not fail
// together (a free permit of five is none of one), so the first barging
// waiter of each limit is woken. Of fair waiters it
// wakes the one that joined the queue first: only the head of the queue can
// win, and this manager's earliest waiter is the only one of its waiters
// that may be it.
//
// Messages can be lost (a reconnection, a full buffer): a waiter never
// relies on them alone. Its backoff step and the holder's TTL bound what a
// lost message costs.
//
// mu guards the waiters and what they want: chans, each subscription's
// waiters and armed flag, each waiter's state, and the hub's record of the
// channels wanted (the hub shares it, and tells the notifier what it hears
// with it held). Every method takes it with defer and makes no round trip
// under it: a waiter that just won a name must never wait on the network
// to leave the list (its lease's deadline runs). The hub
// (internal/pubsub) alone talks to the server.
type notifier struct {
	mu      sync.Mutex
	hub     *pubsub.Hub
	chans   map[string]*subscription // the channels waited on
	closed  bool
	barging atomic.Int64 // barging waiters registered, for waiting's fast path
}

type subscription struct {
	waiters []*waiter // in arrival order
	armed   bool      // confirmed: releases from now on are heard
}

// A waiter's state between wake-ups.
type wakeState uint8

const (
	asleep     wakeState = iota
	woken                // woken, and has not tried since
	wokenAgain           // woken again meanwhile: its attempt may have gone before the release
)

type waiter struct {
	fair    bool
	limit   int           // a permit request's n; 0 for a lease or a reentrant lock
	arrival int64         // when a fair waiter joined the queue: the queue's order
	wake    chan struct{} // capacity 1
	state   wakeState
}

func newNotifier(client redis.UniversalClient) *notifier {
	n := &notifier{chans: map[string]*subscription{}}
	n.hub = pubsub.New(client, backend.Sharded(client), &n.mu, hubOwner{n})
	return n
}

// register adds a waiter for channel. armed reports that the channel's
// subscription is confirmed already: a release from now on wakes the
// waiter, but one since its last attempt did not, so it must try again now.
// Otherwise the confirmation will wake it. A closed notifier returns nil.
// limit is the request's number of permits, 0 for a lease or a reentrant
// lock.
func (n *notifier) register(channel string, fair bool, arrival int64, limit int) (w *waiter, armed bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, false
	}
	w = &waiter{fair: fair, limit: limit, arrival: arrival, wake: make(chan struct{}, 1)}
	if !fair {
		n.barging.Add(1)
	}
	s := n.chans[channel]
	if s == nil {
		s = &subscription{}
		n.chans[channel] = s
		n.hub.Want(channel)
	}
	s.waiters = append(s.waiters, w)
	return w, s.armed
}

// anyBarging reports whether this manager has barging waiters at all: the
// common answer, no, takes no lock that every acquire would share.
func (n *notifier) anyBarging() bool { return n.barging.Load() > 0 }

// waiting reports whether barging waiters of this manager wait for
// channel that could get in whenever a request of limit (0 for a lease)
// could: an acquire that starts now waits its turn behind them rather than
// barging in (above all, a holder that released and asks again at once,
// before its release message has woken them). A permit request waits
// behind those with as many permits or more, never behind fewer: a request
// that raises n may find a permit free that they cannot take.
func (n *notifier) waiting(channel string, limit int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s := n.chans[channel]; s != nil {
		for _, w := range s.waiters {
			if !w.fair && (w.limit == 0) == (limit == 0) && w.limit >= limit {
				return true
			}
		}
	}
	return false
}

// tried records that w made an attempt after being woken, and for a fair
// waiter when the queue has it joining (later than before if the queue had
// forgotten it).
func (n *notifier) tried(w *waiter, arrival int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if arrival != 0 {
		w.arrival = arrival
	}
	if w.state == wokenAgain {
		// A release came while the attempt was on its way, perhaps after
		// the server answered it: look once more.
		w.signal()
		return
	}
	w.state = asleep
}

// unregister removes w. A waiter that leaves without having tried since it
// was woken passes the wake-up on, so that no release goes unanswered.
func (n *notifier) unregister(channel string, w *waiter) {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.chans[channel]
	if s == nil {
		return
	}
	for i, x := range s.waiters {
		if x == w {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			if !w.fair {
				n.barging.Add(-1)
			}
			break
		}
	}
	switch {
	case len(s.waiters) == 0:
		delete(n.chans, channel)
		n.hub.Drop(channel)
	case w.state != asleep:
		s.wakeOne()
	}
}

// wakeOne wakes the first barging waiter of each limit and the earliest
// fair waiter, unless such a waiter is awake already (woken and not yet
// tried: it will try, or pass the wake-up on); that one is woken once more
// after its attempt, which may have reached the server before the release
// did.
func (s *subscription) wakeOne() {
	var head *waiter
	firsts := make([]*waiter, 0, 4) // the first barging waiter of each limit
	for _, w := range s.waiters {
		switch {
		case w.fair && w.state != asleep:
			head = w
		case w.fair && (head == nil || (head.state == asleep && w.arrival < head.arrival)):
			head = w
		case !w.fair:
			firsts = firstOfLimit(firsts, w)
		}
	}
	for _, w := range append(firsts, head) {
		switch {
		case w == nil:
		case w.state != asleep:
			w.state = wokenAgain
		default:
			w.signal()
		}
	}
}

// firstOfLimit keeps in firsts the barging waiter to wake for w's limit:
// the first, unless a later one is awake already.
func firstOfLimit(firsts []*waiter, w *waiter) []*waiter {
	for i, f := range firsts {
		if f.limit == w.limit {
			if f.state == asleep && w.state != asleep {
				firsts[i] = w
			}
			return firsts
		}
	}
	return append(firsts, w)
}

func (s *subscription) wakeAll() {
	for _, w := range s.waiters {
		w.signal()
	}
}

func (w *waiter) signal() {
	w.state = woken
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// hubOwner is what the hub tells the notifier, with n.mu held.
type hubOwner struct{ n *notifier }

// Message wakes the waiters a release concerns.
func (o hubOwner) Message(channel, _ string) {
	if s := o.n.chans[channel]; s != nil {
		s.wakeOne()
	}
}

// Armed: the channel is heard from now on, or again after a loss that may
// have lost messages: every waiter looks again.
func (o hubOwner) Armed(channel string) {
	if s := o.n.chans[channel]; s != nil {
		s.armed = true
		s.wakeAll()
	}
}

// Lost: the channel is not heard until it is armed again. Its waiters are
// not woken: the node may be down, and an attempt that fails ends a wait.
func (o hubOwner) Lost(channel string) {
	if s := o.n.chans[channel]; s != nil {
		s.armed = false
	}
}

// Missed wakes every waiter: messages may have been lost.
func (o hubOwner) Missed() {
	for _, s := range o.n.chans {
		s.wakeAll()
	}
}

// close stops the hub and closes its connections. Waiters still
// registered fall back to their timers.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.hub.Close()
}
