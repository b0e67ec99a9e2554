// Package pubsub keeps the pub/sub subscriptions of one user of a Redis
// client (a lease.Manager, a redisson.Client) on as few connections as the
// server allows: one classic connection for every channel, or on a Cluster
// in sharded mode one connection per primary that owns a channel wanted
// (shard.go). It subscribes a channel while its user wants it, unsubscribes
// it when it no longer does, and reconnects by itself; it tells its user
// what it hears, and when a message may have gone unheard.
//
// The Hub shares its user's mutex: the user's record of who waits on what
// and the Hub's record of what is wanted change together, and the Hub
// calls its Owner's methods with that mutex held. No round trip is made
// under it: a waiter that just won a name must never wait on the network
// to leave the list.
//
// Who owns what:
//   - mu (the user's) guards wanted, ps, dirty, reopen, closed, started,
//     and in sharded mode the receivers' reports.
//   - The subscriber goroutine alone talks to the server about
//     subscriptions (SUBSCRIBE, UNSUBSCRIBE, a new connection) and alone
//     knows what the server serves (subscribed). Being one goroutine, it
//     never sends an UNSUBSCRIBE and a SUBSCRIBE decided in one order in
//     the other.
//   - The receiver goroutine reads the connection and tells the Owner.
//   - In sharded mode (sh is set) ps, reopen, subscribed and the receiver
//     are unused: shard.go says who owns what there.
package pubsub

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Owner is told what a Hub hears. Every method is called with the mutex
// given to New held, and must not block.
type Owner interface {
	// Message is a message on a channel.
	Message(channel, payload string)
	// Armed: channel's subscription is confirmed, for the first time or
	// anew after it was lost. Messages from now on are heard; one
	// published before may not have been.
	Armed(channel string)
	// Lost: channel's subscription is gone until it is Armed again.
	Lost(channel string)
	// Missed: messages on any channel may have gone unheard (the
	// connection broke).
	Missed()
}

// Hub is the subscriptions of one user. Want and Drop are called with the
// user's mutex held; Close without it.
type Hub struct {
	client redis.UniversalClient
	mu     *sync.Mutex
	o      Owner
	sh     *shards // sharded mode: a Cluster's (shard.go); nil otherwise

	wanted map[string]bool
	// armed: the server confirmed the channel's subscription and has not
	// dropped it since, wanted or not: a channel wanted again before its
	// UNSUBSCRIBE went out is subscribed still, and no confirmation will
	// come to say so.
	armed   map[string]bool
	ps      *redis.PubSub
	dirty   map[string]bool // channels whose subscription may need a round trip
	reopen  chan struct{}   // non-nil while the receiver waits for a new connection
	closed  bool
	started bool

	kick       chan struct{} // wakes the subscriber; capacity 1
	done       chan struct{} // closed by Close
	subscriber chan struct{} // closed when the subscriber has returned
	receiver   chan struct{} // closed when the receiver has returned

	subscribed map[string]bool // what the server serves; the subscriber's alone
}

const (
	// Idle is how long a pub/sub connection may be quiet before it is
	// pinged: a dead one is replaced within two of these.
	Idle = 2 * time.Second
	// The wait before subscribing again after a failure, doubled per
	// failure up to the most.
	shardRetryFirst = 50 * time.Millisecond
	shardRetryMost  = 2 * time.Second
)

// New returns the Hub of a user whose mutex is mu. sharded asks for
// SSUBSCRIBE on each channel's primary, which only a *redis.ClusterClient
// has; otherwise every channel is subscribed with SUBSCRIBE on one
// connection. Nothing is dialled before the first Want.
func New(client redis.UniversalClient, sharded bool, mu *sync.Mutex, o Owner) *Hub {
	h := &Hub{client: client, mu: mu, o: o, wanted: map[string]bool{}, armed: map[string]bool{}, dirty: map[string]bool{},
		subscribed: map[string]bool{}, kick: make(chan struct{}, 1), done: make(chan struct{}),
		subscriber: make(chan struct{}), receiver: make(chan struct{})}
	if cc, ok := client.(*redis.ClusterClient); ok && sharded {
		h.sh = newShards(cc)
	}
	return h
}

// Want subscribes channel, unless it is wanted already or the Hub is
// closed. The Owner hears Armed(channel) once the server confirms it: at
// once, before Want returns, when it is subscribed still.
func (h *Hub) Want(channel string) {
	if h.closed || h.wanted[channel] {
		return
	}
	if !h.started {
		h.started = true
		if h.sh != nil {
			go h.subscribeShards()
		} else {
			h.ps = h.client.Subscribe(context.Background()) // connects on first use
			go h.subscribe()
			go h.receive()
		}
	}
	h.wanted[channel] = true
	h.markDirty(channel)
	if h.armed[channel] {
		h.o.Armed(channel)
	}
}

// Drop unsubscribes channel, unless nobody wanted it.
func (h *Hub) Drop(channel string) {
	if !h.wanted[channel] {
		return
	}
	delete(h.wanted, channel)
	h.markDirty(channel)
}

// markDirty asks the subscriber to look at channel's subscription; the
// caller holds mu.
func (h *Hub) markDirty(channel string) {
	h.dirty[channel] = true
	h.poke()
}

// poke wakes the subscriber without blocking.
func (h *Hub) poke() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// subscribe is the subscriber goroutine: it makes the server's
// subscriptions what the user wants, and replaces the connection when the
// receiver asks, until Close.
func (h *Hub) subscribe() {
	defer close(h.subscriber)
	for {
		select {
		case <-h.kick:
		case <-h.done:
			return
		}
		if reopened := h.takeReopen(); reopened != nil {
			h.replaceConn()
			close(reopened)
		}
		h.reconcile()
	}
}

// takeReopen returns the channel of a pending request for a new
// connection, if any, and clears the request.
func (h *Hub) takeReopen() chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.reopen
	h.reopen = nil
	return r
}

// replaceConn starts over on a fresh pub/sub connection: the old one is
// dead but not broken (a black hole). Every channel wanted is subscribed
// anew by reconcile, and the Owner looks for itself meanwhile.
func (h *Hub) replaceConn() {
	old := h.swapConn()
	_ = old.Close()
	clear(h.subscribed)
}

func (h *Hub) swapConn() (old *redis.PubSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old = h.ps
	h.ps = h.client.Subscribe(context.Background())
	clear(h.armed)
	for ch := range h.wanted {
		h.o.Lost(ch)
		h.dirty[ch] = true
	}
	h.o.Missed()
	return old
}

// reconcile sends the SUBSCRIBE and UNSUBSCRIBE the dirty channels need.
func (h *Hub) reconcile() {
	add, drop, ps := h.takeDirty()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if len(drop) > 0 {
		for _, ch := range drop {
			delete(h.subscribed, ch)
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
		// channels nobody may want by then, which nothing would ever
		// unsubscribe. They stay dirty for the next try.
		_ = ps.Unsubscribe(ctx, add...)
		h.redirty(add)
		return
	}
	for _, ch := range add {
		h.subscribed[ch] = true
	}
}

// takeDirty empties the to-do list: the dirty channels wanted that the
// server does not serve, and those it serves that nobody wants.
func (h *Hub) takeDirty() (add, drop []string, ps *redis.PubSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.dirty {
		switch want := h.wanted[ch] && !h.closed; {
		case want && !h.subscribed[ch]:
			add = append(add, ch)
		case !want && h.subscribed[ch]:
			drop = append(drop, ch)
			delete(h.armed, ch)
		}
	}
	clear(h.dirty)
	return add, drop, h.ps
}

// redirty puts channels back on the to-do list, for after the connection
// broke (the receiver pokes the subscriber then).
func (h *Hub) redirty(channels []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ch := range channels {
		h.dirty[ch] = true
	}
}

// receive is the receiver goroutine: it reads the pub/sub connection until
// Close, and has it replaced when it goes quiet and does not answer a ping.
func (h *Hub) receive() {
	defer close(h.receiver)
	pinged := false
	for {
		ps := h.conn()
		msg, err := ps.ReceiveTimeout(context.Background(), Idle)
		if h.deliver(msg) {
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
				h.newConn()
			}
		case timeout:
			// The ping went unanswered: dead but not broken.
			pinged = false
			h.newConn()
		default:
			// The connection broke; go-redis reconnects and resubscribes
			// what it has on the next receive, and each confirmation
			// arms its channel anew. Messages may have been lost
			// meanwhile, so the Owner looks for itself, and what a failed
			// SUBSCRIBE left out is tried again.
			pinged = false
			h.missed()
			select {
			case <-time.After(50 * time.Millisecond):
			case <-h.done:
				return
			}
			h.poke()
		}
	}
}

func (h *Hub) conn() *redis.PubSub {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ps
}

// missed tells the Owner that messages may have been lost.
func (h *Hub) missed() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		clear(h.armed) // until go-redis has subscribed them anew
		h.o.Missed()
	}
}

// deliver tells the Owner what msg says; it reports whether the Hub is
// closed.
func (h *Hub) deliver(msg any) (closed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return true
	}
	switch msg := msg.(type) {
	case *redis.Message:
		h.o.Message(msg.Channel, msg.Payload)
	case *redis.Subscription:
		switch {
		case msg.Kind == "unsubscribe":
			delete(h.armed, msg.Channel)
		case msg.Kind == "subscribe":
			// Armed, or re-armed after a reconnection that may have lost
			// messages.
			h.armed[msg.Channel] = true
			if h.wanted[msg.Channel] {
				h.o.Armed(msg.Channel)
			}
		}
	}
	return false
}

// newConn has the subscriber replace the connection, and waits until it
// has (or Close).
func (h *Hub) newConn() {
	select {
	case <-h.askReopen():
	case <-h.done:
	}
}

// askReopen files the request for a new connection and returns the
// channel the subscriber closes when it is done.
func (h *Hub) askReopen() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.reopen == nil {
		h.reopen = make(chan struct{})
	}
	h.poke()
	return h.reopen
}

// Close stops the Hub's goroutines and closes its connections; the Owner
// hears nothing more. Call it without the mutex held.
func (h *Hub) Close() {
	if !h.markClosed() {
		return
	}
	<-h.subscriber // no round trip of its own is under way, nor will be
	if h.sh != nil {
		h.closeShards()
		return
	}
	_ = h.conn().Close()
	<-h.receiver
}

// markClosed closes the Hub once; it reports whether its goroutines were
// started (and so must be waited for).
func (h *Hub) markClosed() (started bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.closed = true
	close(h.done)
	return h.started
}
