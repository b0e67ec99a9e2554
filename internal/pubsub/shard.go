package pubsub

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
)

// The Hub's sharded mode, for a Cluster. There a message is
// published with SPUBLISH (Redis 7.0 and later), which reaches only the
// nodes of the channel's slot, and a node delivers it only to its own
// SSUBSCRIBE subscribers of that channel: a message costs nothing on the
// nodes that do not own its channel. A go-redis ClusterClient pub/sub
// connection serves the slot of its first channel only, and on
// reconnection resubscribes all its channels in one command, which a
// Cluster refuses across slots. So the Hub keeps a pub/sub connection of
// its own per primary that owns a channel wanted (a shardConn), subscribes
// each channel on its owner, and reconnects by itself:
//
//   - A connection that fails (broken, a ping unanswered, an error reply
//     other than MOVED) is retired: closed, and its channels subscribed
//     anew on their owners once the Cluster's slot map is reloaded (a
//     failover).
//   - A channel the server unsubscribes (sunsubscribe, when its slot moves
//     to another primary, or its primary becomes a replica in a manual
//     failover) or refuses (MOVED: the slot map was stale) is subscribed
//     anew on its owner, after a reload. The node that let it go is
//     avoided for a few tries while the slot map still names it: a map
//     reloaded from a node that has not heard of the change yet is stale
//     too, and a demoted primary takes SSUBSCRIBE (as a replica of the
//     slot's new primary it hears the slot's messages) but is not the
//     slot's owner, where the Hub keeps each subscription.
//   - After each such event the subscriber waits a little before it
//     subscribes again (50ms, doubling to 2s while events keep coming and
//     no subscription is confirmed), so that the reload can land and a
//     Cluster that is down is not hammered. A channel that lost its
//     subscription is Lost to the Owner, and Armed once it is confirmed
//     anew: a message published meanwhile went unheard. The Owner is not
//     told to look before that: the primary may be down, and a failed
//     attempt ends a wait.
//   - A primary that does not know SSUBSCRIBE (Redis 6.2, where messages
//     are published classic, which a Cluster carries to every node) is
//     subscribed with SUBSCRIBE.
//   - A connection stays open, idle or not, until it fails or the Hub
//     closes: there are few primaries, and channels come and go.
//
// Who owns what, besides hub.go's rules (mu guards what is wanted; no
// round trip is made under it):
//   - The subscriber goroutine alone makes, writes to and retires shard
//     connections, and alone knows which channel is subscribed where:
//     everything in shards but events, confirmed and the receivers'
//     WaitGroup.
//   - Each shard connection has a receiver goroutine of its own, which
//     reads it, tells the Owner, pings it when quiet, and reports to the
//     subscriber (events, under mu) a failure, a MOVED, or a channel the
//     server dropped. It returns once its connection has failed or been
//     retired, or the Hub closed.
type shards struct {
	cluster *redis.ClusterClient

	// The subscriber's.
	conns   map[string]*shardConn // by primary address
	placed  map[string]*shardConn // channel -> where it is subscribed
	avoid   map[string]*avoidance // channel -> the node that let it go
	classic map[string]bool       // addresses that refused SSUBSCRIBE
	fails   int                   // events since the last confirmation
	hold    time.Time             // no SSUBSCRIBE before this
	retry   *time.Timer           // pokes the subscriber at hold

	// Guarded by mu.
	events    []shardEvent
	confirmed bool // a subscription was confirmed since the subscriber looked

	receivers sync.WaitGroup
}

// shardConn is a pub/sub connection to one primary.
type shardConn struct {
	addr    string
	ps      *redis.PubSub
	classic bool // SUBSCRIBE: the primary refused SSUBSCRIBE

	// Guarded by mu.
	retired bool           // its receiver stops
	unsubs  map[string]int // SUNSUBSCRIBEs sent, by channel, not yet answered
}

// avoidance is a node that let a channel go, and how many times the slot
// map has named it since.
type avoidance struct {
	addr  string
	tries int
}

// avoidTries bounds how many times a channel waits for the slot map to
// stop naming the node that let it go; then that node is taken at its
// word.
const avoidTries = 5

// shardEvent is a receiver's report: channel was dropped by the server,
// or, when channel is "", the connection answered err.
type shardEvent struct {
	sc      *shardConn
	channel string
	err     error
}

func newShards(c *redis.ClusterClient) *shards {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &shards{cluster: c, conns: map[string]*shardConn{}, placed: map[string]*shardConn{},
		avoid: map[string]*avoidance{}, classic: map[string]bool{}, retry: t}
}

// subscribeShards is the subscriber goroutine of the sharded mode.
func (h *Hub) subscribeShards() {
	defer close(h.subscriber)
	defer h.sh.retry.Stop()
	for {
		select {
		case <-h.kick:
		case <-h.sh.retry.C:
		case <-h.done:
			return
		}
		h.reconcileShards()
	}
}

// reconcileShards handles the receivers' reports, then makes the servers'
// subscriptions what the Owner wants.
func (h *Hub) reconcileShards() {
	sh := h.sh
	events, confirmed := h.takeEvents()
	if confirmed {
		sh.fails = 0
	}
	if len(events) > 0 {
		var lost []string
		for _, ev := range events {
			lost = append(lost, h.shardEvent(ev)...)
		}
		h.lose(lost)
		h.backOff()
	}
	hold := time.Now().Before(sh.hold)
	add, drop := h.takeShardWork(hold)
	h.unsubscribeShards(drop)
	h.subscribeShardChannels(add)
	if h.pending() {
		sh.retry.Reset(time.Until(sh.hold))
	}
}

// shardEvent handles one report; it returns the channels that lost their
// subscription.
func (h *Hub) shardEvent(ev shardEvent) (lost []string) {
	sh := h.sh
	if sh.conns[ev.sc.addr] != ev.sc {
		return nil // retired already
	}
	if ev.channel != "" {
		if sh.placed[ev.channel] == ev.sc {
			lost = append(lost, ev.channel)
		}
		return h.letGo(ev.sc, lost)
	}
	if slot, ok := movedSlot(ev.err); ok {
		for ch, sc := range sh.placed {
			if sc == ev.sc && backend.KeySlot(ch) == slot {
				lost = append(lost, ch)
			}
		}
		return h.letGo(ev.sc, lost)
	}
	if backend.UnknownCommand(ev.err) {
		sh.classic[ev.sc.addr] = true
	} else {
		delete(sh.classic, ev.sc.addr) // perhaps upgraded since
	}
	return h.retire(ev.sc)
}

// letGo takes channels off sc, which let them go, and has them avoid sc.
func (h *Hub) letGo(sc *shardConn, channels []string) []string {
	for _, ch := range channels {
		delete(h.sh.placed, ch)
		h.sh.avoid[ch] = &avoidance{addr: sc.addr}
	}
	return channels
}

// movedSlot returns the slot of a MOVED error reply ("MOVED 3999
// 127.0.0.1:6381").
func movedSlot(err error) (int, bool) {
	if _, ok := redis.IsMovedError(err); !ok {
		return 0, false
	}
	f := strings.Fields(err.Error())
	if len(f) < 2 {
		return 0, false
	}
	slot, e := strconv.Atoi(f[1])
	return slot, e == nil
}

// retire closes sc and returns the channels it served.
func (h *Hub) retire(sc *shardConn) (lost []string) {
	sh := h.sh
	delete(sh.conns, sc.addr)
	for ch, p := range sh.placed {
		if p == sc {
			delete(sh.placed, ch)
			lost = append(lost, ch)
		}
	}
	h.mu.Lock()
	sc.retired = true
	h.mu.Unlock()
	_ = sc.ps.Close()
	return lost
}

// backOff reloads the slot map and holds new subscriptions back for a
// while, longer after each failure.
func (h *Hub) backOff() {
	sh := h.sh
	sh.cluster.ReloadState(context.Background())
	sh.fails++
	d := shardRetryMost
	if sh.fails < 8 {
		d = min(shardRetryFirst<<(sh.fails-1), shardRetryMost)
	}
	sh.hold = time.Now().Add(d)
}

// takeEvents empties the receivers' reports.
func (h *Hub) takeEvents() (events []shardEvent, confirmed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	events, confirmed = h.sh.events, h.sh.confirmed
	h.sh.events, h.sh.confirmed = nil, false
	return events, confirmed
}

// lose marks channels that lost their subscription: to be subscribed
// again, and Lost to the Owner until then. It is not told to look now:
// the node may be down (a failover), and an attempt that fails ends a
// wait. The new subscription's confirmation (Armed) tells it, for a
// message may have gone unheard meanwhile.
func (h *Hub) lose(channels []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ch := range channels {
		delete(h.armed, ch)
		if h.wanted[ch] {
			h.o.Lost(ch)
		}
		h.dirty[ch] = true
	}
}

// takeShardWork empties the to-do list: the channels wanted that are
// not subscribed (left on the list while hold), and those subscribed that
// nobody wants.
func (h *Hub) takeShardWork(hold bool) (add, drop []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.dirty {
		want, placed := h.wanted[ch] && !h.closed, h.sh.placed[ch] != nil
		switch {
		case want && !placed && hold:
			continue
		case want && !placed:
			add = append(add, ch)
		case !want && placed:
			drop = append(drop, ch)
			delete(h.armed, ch)
		}
		if !want {
			delete(h.sh.avoid, ch)
		}
		delete(h.dirty, ch)
	}
	return add, drop
}

// pending reports whether channels wait on the to-do list.
func (h *Hub) pending() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.dirty) > 0
}

// unsubscribeShards unsubscribes channels nobody wants. A failed write
// is the connection's failure, which its receiver reports.
func (h *Hub) unsubscribeShards(drop []string) {
	if len(drop) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	scs := make([]*shardConn, len(drop))
	h.mu.Lock()
	for i, ch := range drop {
		scs[i] = h.sh.placed[ch]
		delete(h.sh.placed, ch)
		if !scs[i].classic {
			scs[i].unsubs[ch]++ // its answer is no news (deliverShard)
		}
	}
	h.mu.Unlock()
	for i, ch := range drop {
		sc := scs[i]
		if sc.classic {
			_ = sc.ps.Unsubscribe(ctx, ch)
		} else if err := sc.ps.SUnsubscribe(ctx, ch); err != nil && h.sh.conns[sc.addr] == sc {
			// The answer may never come, or come on a new connection
			// of go-redis's: start over on one of ours.
			h.lose(h.retire(sc))
		}
	}
}

// subscribeShardChannels subscribes channels on their owners, one command
// each (a Cluster refuses one across slots). At the first failure it
// stops, and the channels left wait for the next try.
func (h *Hub) subscribeShardChannels(add []string) {
	if len(add) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for i, ch := range add {
		sc, err := h.shardFor(ctx, ch)
		if err == nil && h.stale(ch, sc) {
			err, sc = errStaleMap, nil
		}
		if err == nil {
			if sc.classic {
				err = sc.ps.Subscribe(ctx, ch)
			} else {
				err = sc.ps.SSubscribe(ctx, ch)
			}
		}
		if err != nil {
			lost := add[i:]
			if sc != nil {
				lost = append(lost, h.retire(sc)...)
			}
			h.lose(lost)
			h.backOff()
			return
		}
		h.sh.placed[ch] = sc
		delete(h.sh.avoid, ch)
	}
}

// errStaleMap: the slot map names, as a channel's owner, the node that let
// the channel go.
var errStaleMap = errors.New("pubsub: stale slot map")

// stale reports whether sc is the node that let channel go, and the slot
// map has not named it more than avoidTries times since.
func (h *Hub) stale(channel string, sc *shardConn) bool {
	a := h.sh.avoid[channel]
	if a == nil || a.addr != sc.addr {
		return false
	}
	a.tries++
	return a.tries <= avoidTries
}

// shardFor returns the connection to the primary that owns channel's slot,
// opened (with its receiver) if need be.
func (h *Hub) shardFor(ctx context.Context, channel string) (*shardConn, error) {
	sh := h.sh
	node, err := sh.cluster.MasterForKey(ctx, channel)
	if err != nil {
		return nil, err
	}
	addr := node.Options().Addr
	if sc := sh.conns[addr]; sc != nil {
		return sc, nil
	}
	sc := &shardConn{addr: addr, ps: node.Subscribe(context.Background()), classic: sh.classic[addr], unsubs: map[string]int{}}
	sh.conns[addr] = sc
	sh.receivers.Add(1)
	go h.receiveShard(sc)
	return sc, nil
}

// receiveShard is sc's receiver goroutine.
func (h *Hub) receiveShard(sc *shardConn) {
	defer h.sh.receivers.Done()
	pinged := false
	for {
		msg, err := sc.ps.ReceiveTimeout(context.Background(), Idle)
		if h.deliverShard(sc, msg) {
			return
		}
		var ne net.Error
		timeout := errors.As(err, &ne) && ne.Timeout()
		_, moved := movedSlot(err)
		switch {
		case err == nil:
			pinged = false
		case moved:
			h.report(shardEvent{sc: sc, err: err}) // the connection serves on
		case timeout && !pinged:
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			pinged = sc.ps.Ping(ctx) == nil
			cancel()
			if !pinged {
				h.report(shardEvent{sc: sc, err: err})
				return
			}
		default:
			// Broken, silent, or an error reply that names no channel:
			// the subscriber retires sc.
			h.report(shardEvent{sc: sc, err: err})
			return
		}
	}
}

// report hands the subscriber ev, unless sc is retired or the Hub
// closed.
func (h *Hub) report(ev shardEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || ev.sc.retired {
		return
	}
	h.sh.events = append(h.sh.events, ev)
	h.poke()
}

// deliverShard tells the Owner what msg says, and reports a channel the
// server dropped; it reports whether sc's receiver must stop.
func (h *Hub) deliverShard(sc *shardConn, msg any) (stop bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || sc.retired {
		return true
	}
	switch msg := msg.(type) {
	case *redis.Message:
		h.o.Message(msg.Channel, msg.Payload)
	case *redis.Subscription:
		if strings.HasSuffix(msg.Kind, "unsubscribe") {
			delete(h.armed, msg.Channel)
		}
		switch {
		case msg.Kind == "sunsubscribe" && sc.unsubs[msg.Channel] > 0:
			// The answer to an SUNSUBSCRIBE of the subscriber's.
			if sc.unsubs[msg.Channel]--; sc.unsubs[msg.Channel] == 0 {
				delete(sc.unsubs, msg.Channel)
			}
		case msg.Kind == "sunsubscribe":
			// The server let the channel go: its slot moved away. The
			// subscriber knows whether it was still subscribed here.
			h.sh.events = append(h.sh.events, shardEvent{sc: sc, channel: msg.Channel})
			h.poke()
		case msg.Kind == "ssubscribe" || msg.Kind == "subscribe":
			h.armed[msg.Channel] = true
			if h.wanted[msg.Channel] {
				h.o.Armed(msg.Channel)
				h.sh.confirmed = true
			}
		}
	}
	return false
}

// closeShards closes every connection and waits for the receivers; the
// subscriber has returned.
func (h *Hub) closeShards() {
	for _, sc := range h.sh.conns {
		_ = sc.ps.Close()
	}
	h.sh.receivers.Wait()
}
