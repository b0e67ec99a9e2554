package redisson

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/pubsub"
)

// The notifier tells waiting Locks, and holders, of the messages on their
// lock's channel. A Java waiter listens with one kind of pub/sub, the kind
// its client publishes with (SUBSCRIBE, or SSUBSCRIBE on a Cluster with
// sharding on), and a Java holder publishes with that kind: a Go waiter on
// a Cluster therefore listens to both, so that it hears every Java client
// whatever its configuration. One subscription per channel and kind is
// shared by every waiter and holder of the Client on that channel, and
// dropped with the last of them; and every subscription of the Client
// shares one classic pub/sub connection, plus on a Cluster one sharded
// connection per primary that owns a channel listened to (internal/pubsub,
// lease's engine too, which reconnects and resubscribes by itself). A
// Client holding thousands of locks holds a handful of connections, not
// thousands.
//
// mu guards the subscriptions and, shared with the two hubs, what they
// want; the hubs call subOwner's methods with it held.
type notifier struct {
	mu      sync.Mutex
	classic *pubsub.Hub
	shard   *pubsub.Hub // a Cluster's SSUBSCRIBE; nil otherwise
	subs    map[string]*subscription
	closed  bool
}

// The kinds of subscription, as indexes of subscription.armed.
const (
	classicKind = iota
	shardKind
)

type subscription struct {
	channel string
	ready   chan struct{} // closed once every kind was confirmed, or at close
	isReady bool          // ready is closed
	armed   [2]bool       // by kind: confirmed and not lost since
	// late: a waiter stopped waiting for ready: the confirmation that
	// closes it wakes the waiters, whose last look may have gone before.
	late bool
	// waiters in the order they came: a "0" wakes the first not woken
	// yet, as Redisson's LockPubSub releases one permit of its latch.
	waiters []chan struct{}
	// counted: each message is a number of permits, which wakes as many
	// waiters (Redisson's SemaphorePubSub), rather than a lock's "0"/"1".
	counted bool
	// watchers are the Client's holders of the lock: every message, and
	// every time a message may have been missed, pokes each of them (a
	// force unlock publishes what a release does), without taking a
	// waiter's wake.
	watchers []chan struct{}
}

// readyWait bounds how long a waiter waits for its subscription's
// confirmation before it looks anyway: a subscription that fails is tried
// again by the hub, and the waiter falls back on its backoff and the
// holder's TTL meanwhile.
const readyWait = time.Second

// unused reports whether s serves nobody any more, under n.mu.
func (s *subscription) unused() bool { return len(s.waiters) == 0 && len(s.watchers) == 0 }

func newNotifier(c redis.UniversalClient) *notifier {
	n := &notifier{subs: map[string]*subscription{}}
	n.classic = pubsub.New(c, false, &n.mu, subOwner{n, classicKind})
	if backend.Sharded(c) {
		n.shard = pubsub.New(c, true, &n.mu, subOwner{n, shardKind})
	}
	return n
}

// kinds is how many kinds of subscription each channel has.
func (n *notifier) kinds() int {
	if n.shard != nil {
		return 2
	}
	return 1
}

// errNotifierClosed ends a wait whose Client closed.
var errNotifierClosed = errors.New("redisson: client closed")

// listen registers a waiter on channel and returns the channel it is
// woken on (one buffered slot: a wake is never lost, several fold into
// one), and a function that unregisters it: stop(passOn) with passOn
// true when the waiter leaves without the lock, so that a wake it may
// have taken goes to the next waiter instead of being lost. It returns
// once the subscriptions are confirmed (a message published after that
// reaches the waiter), ctx ends or readyWait passed; then the
// confirmation wakes the waiter.
func (n *notifier) listen(ctx context.Context, channel string) (<-chan struct{}, func(passOn bool), error) {
	return n.listenKind(ctx, channel, false)
}

// listenCounted is listen on a semaphore's channel, whose every message
// is a number of permits that wakes as many waiters.
func (n *notifier) listenCounted(ctx context.Context, channel string) (<-chan struct{}, func(passOn bool), error) {
	return n.listenKind(ctx, channel, true)
}

func (n *notifier) listenKind(ctx context.Context, channel string, counted bool) (<-chan struct{}, func(passOn bool), error) {
	wake := make(chan struct{}, 1)
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, nil, errNotifierClosed
	}
	s := n.subscribe(channel, counted)
	s.waiters = append(s.waiters, wake)
	n.mu.Unlock()
	stop := func(passOn bool) {
		n.mu.Lock()
		defer n.mu.Unlock()
		if i := slices.Index(s.waiters, wake); i >= 0 {
			s.waiters = slices.Delete(s.waiters, i, i+1)
		}
		if !s.unused() && passOn {
			s.wakeOne()
		}
		n.release(s)
	}
	t := time.NewTimer(readyWait)
	defer t.Stop()
	select {
	case <-s.ready:
	case <-ctx.Done():
	case <-t.C:
		n.mu.Lock()
		s.late = !s.isReady
		n.mu.Unlock()
	}
	return wake, stop, nil
}

// subscribe returns channel's subscription, made if it has none, under
// n.mu.
func (n *notifier) subscribe(channel string, counted bool) *subscription {
	s := n.subs[channel]
	if s == nil {
		s = &subscription{channel: channel, ready: make(chan struct{}), counted: counted}
		n.subs[channel] = s
		n.classic.Want(channel)
		if n.shard != nil {
			n.shard.Want(channel)
		}
	}
	return s
}

// release drops s if it serves nobody any more, under n.mu.
func (n *notifier) release(s *subscription) {
	if !s.unused() || n.subs[s.channel] != s {
		return
	}
	delete(n.subs, s.channel)
	n.classic.Drop(s.channel)
	if n.shard != nil {
		n.shard.Drop(s.channel)
	}
}

// watch registers a holder on channel: the returned channel is poked
// (one buffered slot) once the subscriptions are confirmed (at once if
// they are already), on every message, and whenever a message may have
// been missed. A holder shares channel's subscription with every waiter
// and holder of the Client on it. stop unregisters it, dropping the
// subscription with its last user.
func (n *notifier) watch(channel string) (poke <-chan struct{}, stop func(), err error) {
	w := make(chan struct{}, 1)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, nil, errNotifierClosed
	}
	s := n.subscribe(channel, false)
	s.watchers = append(s.watchers, w)
	if s.isReady {
		w <- struct{}{} // look now: messages are heard from here on
	}
	stop = func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if i := slices.Index(s.watchers, w); i >= 0 {
			s.watchers = slices.Delete(s.watchers, i, i+1)
		}
		n.release(s)
	}
	return w, stop, nil
}

// subOwner is what one hub (one kind) tells the notifier, with n.mu held.
type subOwner struct {
	n    *notifier
	kind int
}

// Message wakes the waiters of the channel a message is for, and pokes
// its holders.
func (o subOwner) Message(channel, payload string) {
	if s := o.n.subs[channel]; s != nil {
		s.deliver(payload)
	}
}

// Armed: channel's subscription of this kind is confirmed. Once every
// kind is, messages are heard: the holders look then (a force between
// their grant and then went unheard), and so do the waiters that stopped
// waiting for it. A confirmation anew, after a reconnection or a failover,
// has every holder and waiter look: a message may have been missed.
func (o subOwner) Armed(channel string) {
	s := o.n.subs[channel]
	if s == nil {
		return
	}
	s.armed[o.kind] = true
	wasReady := s.isReady
	if !wasReady {
		for k := range o.n.kinds() {
			if !s.armed[k] {
				return
			}
		}
		s.isReady = true
		close(s.ready)
	}
	s.pokeWatchers()
	if wasReady || s.late {
		s.late = false
		s.wakeAll()
	}
}

// Lost: channel's subscription of this kind is gone until Armed anew,
// which has everyone look.
func (o subOwner) Lost(channel string) {
	if s := o.n.subs[channel]; s != nil {
		s.armed[o.kind] = false
	}
}

// Missed: the connection broke, and messages may have been lost: every
// holder and waiter looks.
func (o subOwner) Missed() {
	for _, s := range o.n.subs {
		s.pokeWatchers()
		s.wakeAll()
	}
}

// deliver wakes the waiters of s a message is for, and pokes every
// holder, under n.mu. A lock's messages: "0" (UNLOCK_MESSAGE) lets one
// waiter look, "1" (READ_UNLOCK_MESSAGE) every one. A semaphore's: a
// number of permits wakes as many waiters not woken yet, none for 0 or
// less, as SemaphorePubSub releases min(waiters, n) permits of its latch;
// one that is not a number, every waiter.
func (s *subscription) deliver(payload string) {
	s.pokeWatchers()
	if !s.counted {
		if payload == "0" {
			s.wakeOne()
		} else {
			s.wakeAll()
		}
		return
	}
	k, err := strconv.ParseInt(payload, 10, 64)
	if err != nil {
		s.wakeAll()
		return
	}
	for range min(k, int64(len(s.waiters))) {
		s.wakeOne()
	}
}

// wakeAll wakes every waiter of s, under n.mu.
func (s *subscription) wakeAll() {
	for _, w := range s.waiters {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// wakeOne wakes the first waiter of s not woken yet, under n.mu.
func (s *subscription) wakeOne() {
	for _, w := range s.waiters {
		select {
		case w <- struct{}{}:
			return
		default: // woken already and not yet looking: the next one
		}
	}
}

// pokeWatchers pokes every holder of s, under n.mu.
func (s *subscription) pokeWatchers() {
	for _, w := range s.watchers {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// close wakes every waiter, ends every subscription and waits for the
// hubs' goroutines.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	for _, s := range n.subs {
		s.wakeAll()
		if !s.isReady {
			s.isReady = true
			close(s.ready)
		}
	}
	n.subs = map[string]*subscription{}
	n.mu.Unlock()
	n.classic.Close()
	if n.shard != nil {
		n.shard.Close()
	}
}
