package lease

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
)

// notifier wakes waiters when the names they wait for are released: one
// pub/sub connection per manager serves every waiter (docs/design.md
// section 5), or on a Cluster one per primary that owns a channel waited
// on (sharded mode, notify_shard.go). It subscribes to a name's channel
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
// Who owns what:
//   - mu guards the waiters and what they want: chans, each
//     subscription's waiters and armed flag, each waiter's state, ps, and
//     the subscriber's to-do list. Every method takes it with defer and
//     makes no round trip under it: a waiter that just won a name must
//     never wait on the network to leave the list (its lease's deadline
//     runs).
//   - The subscriber goroutine alone talks to the server about
//     subscriptions (SUBSCRIBE, UNSUBSCRIBE, a new connection) and alone
//     knows what the server serves (subscribed). Being one goroutine, it
//     never sends an UNSUBSCRIBE and a SUBSCRIBE decided in one order in
//     the other.
//   - The receiver goroutine reads the connection and wakes waiters.
//   - In sharded mode (sh is set) ps, reopen, subscribed and the receiver
//     are unused: notify_shard.go says who owns what there.
type notifier struct {
	client redis.UniversalClient
	sh     *shards // sharded mode: a Cluster's (notify_shard.go); nil otherwise

	mu      sync.Mutex
	ps      *redis.PubSub
	chans   map[string]*subscription // the channels waited on
	dirty   map[string]bool          // channels whose subscription may need a round trip
	reopen  chan struct{}            // non-nil while the receiver waits for a new connection
	closed  bool
	started bool

	barging atomic.Int64 // barging waiters registered, for waiting's fast path

	kick       chan struct{} // wakes the subscriber; capacity 1
	done       chan struct{} // closed by close
	subscriber chan struct{} // closed when the subscriber has returned
	receiver   chan struct{} // closed when the receiver has returned

	subscribed map[string]bool // what the server serves; the subscriber's alone
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
	n := &notifier{client: client, chans: map[string]*subscription{}, dirty: map[string]bool{},
		subscribed: map[string]bool{}, kick: make(chan struct{}, 1), done: make(chan struct{}),
		subscriber: make(chan struct{}), receiver: make(chan struct{})}
	if backend.Sharded(client) {
		n.sh = newShards(client.(*redis.ClusterClient))
	}
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
	if !n.started {
		n.started = true
		if n.sh != nil {
			go n.subscribeShards()
		} else {
			n.ps = n.client.Subscribe(context.Background()) // connects on first use
			go n.subscribe()
			go n.receive()
		}
	}
	w = &waiter{fair: fair, limit: limit, arrival: arrival, wake: make(chan struct{}, 1)}
	if !fair {
		n.barging.Add(1)
	}
	s := n.chans[channel]
	if s == nil {
		s = &subscription{}
		n.chans[channel] = s
		n.markDirty(channel)
	}
	s.waiters = append(s.waiters, w)
	return w, s.armed
}

// markDirty asks the subscriber to look at channel's subscription; the
// caller holds mu.
func (n *notifier) markDirty(channel string) {
	n.dirty[channel] = true
	n.poke()
}

// poke wakes the subscriber without blocking.
func (n *notifier) poke() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
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
		n.markDirty(channel)
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

// wakeEveryone wakes every waiter: messages may have been lost.
func (n *notifier) wakeEveryone() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.chans {
		s.wakeAll()
	}
}

// subscribe is the subscriber goroutine: it makes the server's
// subscriptions what the waiters want, and replaces the connection when
// the receiver asks, until close.
func (n *notifier) subscribe() {
	defer close(n.subscriber)
	for {
		select {
		case <-n.kick:
		case <-n.done:
			return
		}
		if reopened := n.takeReopen(); reopened != nil {
			n.replaceConn()
			close(reopened)
		}
		n.reconcile()
	}
}

// takeReopen returns the channel of a pending request for a new
// connection, if any, and clears the request.
func (n *notifier) takeReopen() chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.reopen
	n.reopen = nil
	return r
}

// replaceConn starts over on a fresh pub/sub connection: the old one is
// dead but not broken (a black hole). Every channel waited on is
// subscribed anew by reconcile, and the waiters look for themselves
// meanwhile.
func (n *notifier) replaceConn() {
	old := n.swapConn()
	_ = old.Close()
	clear(n.subscribed)
}

func (n *notifier) swapConn() (old *redis.PubSub) {
	n.mu.Lock()
	defer n.mu.Unlock()
	old = n.ps
	n.ps = n.client.Subscribe(context.Background())
	for ch, s := range n.chans {
		s.armed = false
		s.wakeAll()
		n.dirty[ch] = true
	}
	return old
}

// reconcile sends the SUBSCRIBE and UNSUBSCRIBE the dirty channels need.
func (n *notifier) reconcile() {
	add, drop, ps := n.takeDirty()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if len(drop) > 0 {
		for _, ch := range drop {
			delete(n.subscribed, ch)
		}
		_ = ps.Unsubscribe(ctx, drop...)
	}
	if len(add) == 0 {
		return
	}
	if err := ps.Subscribe(ctx, add...); err != nil {
		// go-redis adds channels to the list it resubscribes on every
		// reconnection before it sends anything: a failed SUBSCRIBE must
		// take them out again, or a later reconnection subscribes to
		// channels nobody may wait on by then, which nothing would ever
		// unsubscribe. They stay dirty for the next try.
		_ = ps.Unsubscribe(ctx, add...)
		n.redirty(add)
		return
	}
	for _, ch := range add {
		n.subscribed[ch] = true
	}
}

// takeDirty empties the to-do list: the dirty channels waited on that the
// server does not serve, and those it serves that nobody waits on.
func (n *notifier) takeDirty() (add, drop []string, ps *redis.PubSub) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.dirty {
		switch want := n.chans[ch] != nil && !n.closed; {
		case want && !n.subscribed[ch]:
			add = append(add, ch)
		case !want && n.subscribed[ch]:
			drop = append(drop, ch)
		}
	}
	clear(n.dirty)
	return add, drop, n.ps
}

// redirty puts channels back on the to-do list, for after the connection
// broke (the receiver pokes the subscriber then).
func (n *notifier) redirty(channels []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ch := range channels {
		n.dirty[ch] = true
	}
}

// receive is the receiver goroutine: it reads the pub/sub connection until
// close, and has it replaced when it goes quiet and does not answer a ping.
func (n *notifier) receive() {
	defer close(n.receiver)
	pinged := false
	for {
		ps := n.conn()
		msg, err := ps.ReceiveTimeout(context.Background(), pubsubIdle)
		if n.deliver(msg) {
			return // closed
		}
		var ne net.Error
		timeout := errors.As(err, &ne) && ne.Timeout()
		switch {
		case err == nil:
			pinged = false
		case timeout && !pinged:
			// Quiet for a while: ask the server whether the connection
			// still works; the answer arrives as a message.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			pinged = ps.Ping(ctx) == nil
			cancel()
			if !pinged {
				n.newConn()
			}
		case timeout:
			// The ping went unanswered: dead but not broken.
			pinged = false
			n.newConn()
		default:
			// The connection broke; go-redis reconnects and resubscribes
			// what it has on the next receive. Messages may have been
			// lost meanwhile, so the waiters look for themselves, and what
			// a failed SUBSCRIBE left out is tried again.
			pinged = false
			n.wakeEveryone()
			select {
			case <-time.After(50 * time.Millisecond):
			case <-n.done:
				return
			}
			n.poke()
		}
	}
}

func (n *notifier) conn() *redis.PubSub {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ps
}

// deliver wakes the waiters msg concerns; it reports whether the notifier
// is closed.
func (n *notifier) deliver(msg any) (closed bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return true
	}
	switch msg := msg.(type) {
	case *redis.Message:
		if s := n.chans[msg.Channel]; s != nil {
			s.wakeOne()
		}
	case *redis.Subscription:
		if s := n.chans[msg.Channel]; s != nil && msg.Kind == "subscribe" {
			// Armed, or re-armed after a reconnection that may have lost
			// messages: every waiter looks again.
			s.armed = true
			s.wakeAll()
		}
	}
	return false
}

// newConn has the subscriber replace the connection, and waits until it
// has (or close).
func (n *notifier) newConn() {
	select {
	case <-n.askReopen():
	case <-n.done:
	}
}

// askReopen files the request for a new connection and returns the
// channel the subscriber closes when it is done.
func (n *notifier) askReopen() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.reopen == nil {
		n.reopen = make(chan struct{})
	}
	n.poke()
	return n.reopen
}

// close stops both goroutines and closes the connection. Waiters still
// registered fall back to their timers.
func (n *notifier) close() {
	if !n.markClosed() {
		return
	}
	<-n.subscriber // no round trip of its own is under way, nor will be
	if n.sh != nil {
		n.closeShards()
		return
	}
	_ = n.conn().Close()
	<-n.receiver
}

// markClosed closes the notifier once; it reports whether its goroutines
// were started (and so must be waited for).
func (n *notifier) markClosed() (started bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	n.closed = true
	close(n.done)
	return n.started
}
