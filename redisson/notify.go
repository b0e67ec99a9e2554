package redisson

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The notifier tells waiting Locks of the messages on their lock's
// channel. A Java waiter listens with one kind of pub/sub, the kind its
// client publishes with (SUBSCRIBE, or SSUBSCRIBE on a Cluster with
// sharding on), and a Java holder publishes with that kind: a Go waiter on
// a Cluster therefore listens to both, so that it hears every Java client
// whatever its configuration. One subscription per channel and kind is
// shared by every waiter of the Client on that channel, and closed with
// the last of them: a Cluster's sharded channel must be subscribed on the
// node that owns its slot, which a go-redis pub/sub connection of its own
// finds (and finds again after a reconnection) by itself, and a wait is
// short-lived.
type notifier struct {
	client  redis.UniversalClient
	sharded bool // listen with SSUBSCRIBE too

	mu     sync.Mutex
	subs   map[string]*subscription
	closed bool
	wg     sync.WaitGroup
}

type subscription struct {
	channel string
	conns   []*redis.PubSub
	ready   chan struct{} // closed once every kind is confirmed, or failed
	// waiters in the order they came: a "0" wakes the first not woken
	// yet, as Redisson's LockPubSub releases one permit of its latch.
	waiters []chan struct{}
	// counted: each message is a number of permits, which wakes as many
	// waiters (Redisson's SemaphorePubSub), rather than a lock's "0"/"1".
	counted bool
	// watchers are the Client's holders of the lock: every message, and
	// every error of a connection, pokes each of them (a force unlock
	// publishes what a release does), without taking a waiter's wake.
	watchers []chan struct{}
}

// unused reports whether s serves nobody any more, under n.mu.
func (s *subscription) unused() bool { return len(s.waiters) == 0 && len(s.watchers) == 0 }

func newNotifier(c redis.UniversalClient) *notifier {
	_, cluster := c.(*redis.ClusterClient)
	return &notifier{client: c, sharded: cluster, subs: map[string]*subscription{}}
}

// errNotifierClosed ends a wait whose Client closed.
var errNotifierClosed = errors.New("redisson: client closed")

// listen registers a waiter on channel and returns the channel it is
// woken on (one buffered slot: a wake is never lost, several fold into
// one), and a function that unregisters it: stop(passOn) with passOn
// true when the waiter leaves without the lock, so that a wake it may
// have taken goes to the next waiter instead of being lost. It returns
// once the subscriptions are confirmed (a message published after that
// reaches the waiter) or ctx ends; a subscription that failed leaves the
// waiter to its backoff and the holder's TTL.
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
		if i := slices.Index(s.waiters, wake); i >= 0 {
			s.waiters = slices.Delete(s.waiters, i, i+1)
		}
		if !s.unused() && passOn {
			s.wakeOne()
		}
		n.release(s)
	}
	select {
	case <-s.ready:
	case <-ctx.Done():
	}
	return wake, stop, nil
}

// subscribe returns channel's subscription, opened if it has none, under
// n.mu.
func (n *notifier) subscribe(channel string, counted bool) *subscription {
	s := n.subs[channel]
	if s == nil {
		s = &subscription{channel: channel, ready: make(chan struct{}), counted: counted}
		n.subs[channel] = s
		n.open(s)
	}
	return s
}

// release closes s if it serves nobody any more. It takes n.mu, held by
// the caller.
func (n *notifier) release(s *subscription) {
	var conns []*redis.PubSub
	if s.unused() && n.subs[s.channel] == s {
		delete(n.subs, s.channel)
		conns = s.conns
	}
	n.mu.Unlock()
	for _, ps := range conns {
		_ = ps.Close()
	}
}

// watch registers a holder on channel: the returned channel is poked
// (one buffered slot) on every message and on every error of a
// subscription, and ready is closed once the subscriptions are confirmed
// (or failed). A holder shares channel's subscription with every waiter
// and holder of the Client on it: it opens none of its own. stop
// unregisters it, closing the subscription with its last user.
func (n *notifier) watch(channel string) (poke <-chan struct{}, ready <-chan struct{}, stop func(), err error) {
	w := make(chan struct{}, 1)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, nil, nil, errNotifierClosed
	}
	s := n.subscribe(channel, false)
	s.watchers = append(s.watchers, w)
	stop = func() {
		n.mu.Lock()
		if i := slices.Index(s.watchers, w); i >= 0 {
			s.watchers = slices.Delete(s.watchers, i, i+1)
		}
		n.release(s)
	}
	return w, s.ready, stop, nil
}

// open starts the subscriptions of s, under n.mu.
func (n *notifier) open(s *subscription) {
	ctx := context.Background()
	kinds := []*redis.PubSub{n.client.Subscribe(ctx)}
	if n.sharded {
		kinds = append(kinds, n.client.SSubscribe(ctx))
	}
	s.conns = kinds
	var confirmed sync.WaitGroup
	confirmed.Add(len(kinds))
	for i, ps := range kinds {
		var once sync.Once
		done := func() { once.Do(confirmed.Done) }
		n.wg.Add(1)
		go n.receive(s, ps, i == 1, done)
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		confirmed.Wait()
		close(s.ready)
	}()
}

// receive reads one subscription of s until it is closed: it confirms it
// (done), and wakes every waiter of s on each message and on each error
// (a message may have been missed while the connection was down).
func (n *notifier) receive(s *subscription, ps *redis.PubSub, sharded bool, done func()) {
	defer n.wg.Done()
	defer done()
	ctx := context.Background()
	var err error
	if sharded {
		err = ps.SSubscribe(ctx, s.channel)
	} else {
		err = ps.Subscribe(ctx, s.channel)
	}
	if err != nil {
		return
	}
	for {
		msg, err := ps.Receive(ctx)
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Channel == s.channel && (m.Kind == "subscribe" || m.Kind == "ssubscribe") {
				done()
			}
			continue
		case *redis.Message:
			n.deliver(s, m.Payload)
			continue
		}
		if err == nil {
			continue // a pong
		}
		if errors.Is(err, redis.ErrClosed) || !n.current(s) {
			return
		}
		if sharded && strings.Contains(strings.ToLower(err.Error()), "unknown command") {
			// A server older than 7.0 has no SSUBSCRIBE, nor SPUBLISH:
			// every message there is classic, heard by the other kind.
			return
		}
		done() // a failed subscription: the waiter falls back on its timers
		n.mu.Lock()
		s.pokeWatchers() // a message may have been missed: they look
		n.mu.Unlock()
		n.wake(s, true)
		// go-redis dials again on the next Receive: pause, so that a
		// server that is down is not hammered.
		time.Sleep(50 * time.Millisecond)
	}
}

// current reports whether s still serves waiters.
func (n *notifier) current(s *subscription) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.closed && n.subs[s.channel] == s
}

// deliver wakes the waiters of s a message is for. A lock's messages:
// "0" (UNLOCK_MESSAGE) lets one waiter look, "1" (READ_UNLOCK_MESSAGE)
// every one. A semaphore's: a number of permits wakes as many waiters
// not woken yet, none for 0 or less, as SemaphorePubSub releases
// min(waiters, n) permits of its latch; one that is not a number, every
// waiter.
func (n *notifier) deliver(s *subscription, payload string) {
	n.mu.Lock()
	s.pokeWatchers()
	n.mu.Unlock()
	if !s.counted {
		n.wake(s, payload != "0")
		return
	}
	k, err := strconv.ParseInt(payload, 10, 64)
	if err != nil {
		n.wake(s, true)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for range min(k, int64(len(s.waiters))) {
		s.wakeOne()
	}
}

// wake wakes every waiter of s (all), or the first not woken yet.
func (n *notifier) wake(s *subscription, all bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !all {
		s.wakeOne()
		return
	}
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

// close ends every subscription and waits for its goroutines.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	subs := n.subs
	n.subs = map[string]*subscription{}
	for _, s := range subs {
		for _, w := range s.waiters {
			select {
			case w <- struct{}{}:
			default:
			}
		}
	}
	n.mu.Unlock()
	for _, s := range subs {
		for _, ps := range s.conns {
			_ = ps.Close()
		}
	}
	n.wg.Wait()
}
