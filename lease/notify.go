package lease

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// notifier wakes waiters when the names they wait for are released: one
// pub/sub connection per manager serves every waiter (docs/design.md section 5).
// It subscribes to a name's channel while someone waits for it.
//
// A message wakes one barging waiter of the manager: it tries, and wins
// unless a waiter elsewhere was quicker, in which case the name is held
// again and everyone keeps waiting for its next release. Waking them all
// would only have them all try and all but one fail. Of fair waiters it
// wakes the one that joined the queue first: only the head of the queue can
// win, and this manager's earliest waiter is the only one of its waiters
// that may be it.
//
// Messages can be lost (a reconnection, a full buffer): a waiter never
// relies on them alone. Its backoff step and the holder's TTL bound what a
// lost message costs.
//
// Round trips to the server (SUBSCRIBE, UNSUBSCRIBE, a new connection) are
// made under io, never under mu: a waiter that just won a name must never
// wait on the network to leave the list (it holds a lease whose deadline
// runs).
type notifier struct {
	client redis.UniversalClient

	mu      sync.Mutex
	ps      *redis.PubSub
	chans   map[string]*subscription // the channels waited on
	closed  bool
	started bool
	done    chan struct{} // closed by close
	stopped chan struct{} // closed when the receiver has returned

	barging atomic.Int64 // barging waiters registered, for waiting's fast path

	io         sync.Mutex      // orders SUBSCRIBE and UNSUBSCRIBE; held over round trips
	subscribed map[string]bool // what io last asked of the server; guarded by io
}

type subscription struct {
	waiters []*waiter // in arrival order
	armed   bool      // confirmed: releases from now on are heard
}

type waiter struct {
	fair    bool
	arrival int64         // when a fair waiter joined the queue: the queue's order
	wake    chan struct{} // capacity 1
	pending bool          // woken, and has not tried since
	again   bool          // woken again while pending: its attempt may have gone before the release
}

func newNotifier(client redis.UniversalClient) *notifier {
	return &notifier{client: client, chans: map[string]*subscription{}, subscribed: map[string]bool{},
		done: make(chan struct{}), stopped: make(chan struct{})}
}

// register adds a waiter for channel. armed reports that the channel's
// subscription is confirmed already: a release from now on wakes the
// waiter, but one since its last attempt did not, so it must try again now.
// Otherwise the confirmation will wake it. A closed notifier returns nil.
func (n *notifier) register(channel string, fair bool, arrival int64) (w *waiter, armed bool) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, false
	}
	if !n.started {
		n.started = true
		n.ps = n.client.Subscribe(context.Background()) // connects on first use
		go n.receive()
	}
	w = &waiter{fair: fair, arrival: arrival, wake: make(chan struct{}, 1)}
	if !fair {
		n.barging.Add(1)
	}
	s := n.chans[channel]
	fresh := s == nil
	if fresh {
		s = &subscription{}
		n.chans[channel] = s
	}
	s.waiters = append(s.waiters, w)
	armed = s.armed
	n.mu.Unlock()
	if fresh {
		n.sync(channel)
	}
	return w, armed
}

// sync makes the server's subscription to channel what the waiters want:
// SUBSCRIBE while someone waits, UNSUBSCRIBE when nobody does. It reads what
// is wanted under io, so that a SUBSCRIBE and an UNSUBSCRIBE decided in one
// order never reach the server in the other. The receiver arms the
// subscription when the server confirms it; a failed SUBSCRIBE leaves it
// unarmed, and waiters poll until the connection is back (resubscribe).
func (n *notifier) sync(channel string) {
	n.io.Lock()
	defer n.io.Unlock()
	n.mu.Lock()
	want := n.chans[channel] != nil && !n.closed
	ps := n.ps
	n.mu.Unlock()
	if want == n.subscribed[channel] {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if want {
		n.subscribe(ctx, ps, channel)
		return
	}
	delete(n.subscribed, channel)
	_ = ps.Unsubscribe(ctx, channel)
}

// subscribe sends SUBSCRIBE for channels and records which the server now
// serves; the caller holds io. go-redis adds channels to the list it
// resubscribes on every reconnection before it sends anything, so a failed
// SUBSCRIBE must take them out again: otherwise a later reconnection
// subscribes to channels nobody waits on, and since they were never
// recorded as subscribed, nothing would ever unsubscribe them.
func (n *notifier) subscribe(ctx context.Context, ps *redis.PubSub, channels ...string) {
	if err := ps.Subscribe(ctx, channels...); err != nil {
		_ = ps.Unsubscribe(ctx, channels...) // drops them from go-redis's list, whatever it answers
		return
	}
	for _, ch := range channels {
		n.subscribed[ch] = true
	}
}

// resubscribe subscribes to the channels waited on that a failed SUBSCRIBE
// left out, once the connection broke and go-redis made a new one.
func (n *notifier) resubscribe() {
	n.io.Lock()
	defer n.io.Unlock()
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	ps := n.ps
	var missing []string
	for ch := range n.chans {
		if !n.subscribed[ch] {
			missing = append(missing, ch)
		}
	}
	n.mu.Unlock()
	if len(missing) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n.subscribe(ctx, ps, missing...)
}

// waiting reports whether barging waiters of this manager wait for
// channel: an acquire that starts now waits its turn behind them rather
// than barging in (above all, a holder that released and asks again at
// once, before its release message has woken them).
func (n *notifier) waiting(channel string) bool {
	if n.barging.Load() == 0 {
		return false // the common case, and no lock every acquire shares
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if s := n.chans[channel]; s != nil {
		for _, w := range s.waiters {
			if !w.fair {
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
	w.pending = false
	if arrival != 0 {
		w.arrival = arrival
	}
	if w.again {
		// A release came while the attempt was on its way, perhaps after
		// the server answered it: look once more.
		w.again = false
		w.signal()
	}
}

// unregister removes w. A waiter that leaves without having tried since it
// was woken passes the wake-up on, so that no release goes unanswered.
func (n *notifier) unregister(channel string, w *waiter) {
	n.mu.Lock()
	s := n.chans[channel]
	if s == nil {
		n.mu.Unlock()
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
	last := len(s.waiters) == 0
	if last {
		delete(n.chans, channel)
	} else if w.pending {
		s.wakeOne()
	}
	n.mu.Unlock()
	if last {
		n.sync(channel)
	}
}

// wakeOne wakes the first barging waiter and the earliest fair waiter,
// unless such a waiter is awake already (woken and not yet tried: it will
// try, or pass the wake-up on); that one is woken once more after its
// attempt, which may have reached the server before the release did.
func (s *subscription) wakeOne() {
	var first, head *waiter
	for _, w := range s.waiters {
		switch {
		case w.pending && w.fair:
			head = w
		case w.pending:
			first = w
		case w.fair && (head == nil || (!head.pending && w.arrival < head.arrival)):
			head = w
		case !w.fair && first == nil:
			first = w
		}
	}
	for _, w := range []*waiter{first, head} {
		switch {
		case w == nil:
		case w.pending:
			w.again = true
		default:
			w.signal()
		}
	}
}

func (s *subscription) wakeAll() {
	for _, w := range s.waiters {
		w.signal()
	}
}

func (w *waiter) signal() {
	w.pending = true
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// receive is the notifier's goroutine: it reads the pub/sub connection
// until close.
func (n *notifier) receive() {
	defer close(n.stopped)
	const idle = 2 * time.Second // then a ping: a dead connection is replaced within two of these
	pinged := false
	for {
		n.mu.Lock()
		ps := n.ps
		n.mu.Unlock()
		msg, err := ps.ReceiveTimeout(context.Background(), idle)
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			return
		}
		switch msg := msg.(type) {
		case *redis.Message:
			if s := n.chans[msg.Channel]; s != nil {
				s.wakeOne()
			}
		case *redis.Subscription:
			if s := n.chans[msg.Channel]; s != nil && msg.Kind == "subscribe" {
				// Armed, or re-armed after a reconnection that may have
				// lost messages: every waiter looks again.
				s.armed = true
				s.wakeAll()
			}
		}
		var ne net.Error
		timeout := errors.As(err, &ne) && ne.Timeout()
		switch {
		case err == nil:
			pinged = false
			n.mu.Unlock()
		case timeout && !pinged:
			// Quiet for a while: ask the server whether the connection
			// still works; the answer arrives as a message.
			n.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			pinged = ps.Ping(ctx) == nil
			cancel()
			if !pinged {
				n.reopen()
			}
		case timeout:
			// The ping went unanswered: the connection is dead but not
			// broken (a black hole). Start over on a fresh one.
			pinged = false
			n.mu.Unlock()
			n.reopen()
		default:
			// The connection broke; go-redis reconnects and resubscribes
			// on the next receive. Messages may have been lost meanwhile,
			// so the waiters look for themselves.
			pinged = false
			for _, s := range n.chans {
				s.wakeAll()
			}
			n.mu.Unlock()
			select {
			case <-time.After(50 * time.Millisecond):
			case <-n.done:
				return
			}
			n.resubscribe()
		}
	}
}

// reopen replaces the pub/sub connection and subscribes again to every
// channel waited on; the waiters look for themselves meanwhile.
func (n *notifier) reopen() {
	n.io.Lock()
	defer n.io.Unlock()
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	old := n.ps
	n.ps = n.client.Subscribe(context.Background())
	ps := n.ps
	channels := make([]string, 0, len(n.chans))
	for ch, s := range n.chans {
		s.armed = false
		s.wakeAll()
		channels = append(channels, ch)
	}
	n.mu.Unlock()
	_ = old.Close()
	clear(n.subscribed)
	if len(channels) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n.subscribe(ctx, ps, channels...)
}

// close stops the receiver and closes the connection. Waiters still
// registered fall back to their timers.
func (n *notifier) close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	close(n.done)
	started := n.started
	n.mu.Unlock()
	if !started {
		return
	}
	n.io.Lock() // no SUBSCRIBE is under way, and reopen sees closed
	n.mu.Lock()
	ps := n.ps
	n.mu.Unlock()
	_ = ps.Close()
	n.io.Unlock()
	<-n.stopped
}
