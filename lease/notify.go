package lease

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// notifier wakes waiters when the names they wait for are released: one
// pub/sub connection per manager serves every waiter (DESIGN.md section 5).
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
type notifier struct {
	client redis.UniversalClient

	mu      sync.Mutex
	ps      *redis.PubSub
	chans   map[string]*subscription
	closed  bool
	started bool
	done    chan struct{} // closed by close
	stopped chan struct{} // closed when the receiver has returned
}

type subscription struct {
	waiters []*waiter // in arrival order
	pending int       // SUBSCRIBE commands sent and not yet confirmed
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
	return &notifier{client: client, chans: map[string]*subscription{}, done: make(chan struct{}), stopped: make(chan struct{})}
}

// register adds a waiter for channel. armed reports that the channel's
// subscription is confirmed already: a release from now on wakes the
// waiter, but one since its last attempt did not, so it must try again now.
// Otherwise the confirmation will wake it. A closed notifier returns nil.
func (n *notifier) register(channel string, fair bool, arrival int64) (w *waiter, armed bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, false
	}
	if !n.started {
		n.started = true
		n.ps = n.client.Subscribe(context.Background())
		go n.receive()
	}
	w = &waiter{fair: fair, arrival: arrival, wake: make(chan struct{}, 1)}
	s := n.chans[channel]
	if s == nil {
		s = &subscription{}
		n.chans[channel] = s
		n.subscribe(channel, s)
	}
	s.waiters = append(s.waiters, w)
	return w, s.armed
}

// subscribe sends SUBSCRIBE; the receiver arms the subscription when the
// server confirms it. A failed write leaves it unarmed: waiters then poll
// until the connection comes back and go-redis resubscribes.
func (n *notifier) subscribe(channel string, s *subscription) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := n.ps.Subscribe(ctx, channel); err == nil {
		s.pending++
	}
}

// waiting reports whether barging waiters of this manager wait for
// channel: an acquire that starts now waits its turn behind them rather
// than barging in (above all, a holder that released and asks again at
// once, before its release message has woken them).
func (n *notifier) waiting(channel string) bool {
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
	defer n.mu.Unlock()
	s := n.chans[channel]
	if s == nil {
		return
	}
	for i, x := range s.waiters {
		if x == w {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			break
		}
	}
	if len(s.waiters) > 0 {
		if w.pending {
			s.wakeOne()
		}
		return
	}
	delete(n.chans, channel)
	if !n.closed {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = n.ps.Unsubscribe(ctx, channel)
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

// awake reports whether a barging waiter was woken and has not tried yet.
func (s *subscription) awake() bool {
	for _, w := range s.waiters {
		if w.pending && !w.fair {
			return true
		}
	}
	return false
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
				if s.pending > 0 {
					s.pending--
				}
				if s.pending == 0 {
					// Armed, or re-armed after a reconnection that may
					// have lost messages: every waiter looks again.
					s.armed = true
					s.wakeAll()
				}
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
				n.mu.Lock()
				n.reopen()
				n.mu.Unlock()
			}
		case timeout:
			// The ping went unanswered: the connection is dead but not
			// broken (a black hole). Start over on a fresh one.
			pinged = false
			n.reopen()
			n.mu.Unlock()
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
		}
	}
}

// reopen replaces the pub/sub connection and subscribes again to every
// channel waited on; the waiters look for themselves meanwhile. n.mu is held.
func (n *notifier) reopen() {
	if n.closed {
		return
	}
	_ = n.ps.Close()
	n.ps = n.client.Subscribe(context.Background())
	for ch, s := range n.chans {
		s.pending, s.armed = 0, false
		s.wakeAll()
		n.subscribe(ch, s)
	}
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
	ps := n.ps
	n.mu.Unlock()
	if !started {
		return
	}
	_ = ps.Close()
	<-n.stopped
}
