package lease

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// Whom a new barging request waits behind, and whom a release wakes, when
// requests of one manager ask for different things: a request must never
// wait behind those that cannot get in when it can (a permit of five is
// free while none of one is), and a release must reach one waiter of each
// such kind.
func TestWaitingAndWakingByLimit(t *testing.T) {
	lease := &waiter{limit: 0, wake: make(chan struct{}, 1)}
	one := &waiter{limit: 1, wake: make(chan struct{}, 1)}
	oneMore := &waiter{limit: 1, wake: make(chan struct{}, 1)}
	five := &waiter{limit: 5, wake: make(chan struct{}, 1)}
	fair := &waiter{fair: true, limit: 5, arrival: 1, wake: make(chan struct{}, 1)}
	n := &notifier{chans: map[string]*subscription{"ch": {waiters: []*waiter{one, oneMore}}}}

	for _, c := range []struct {
		limit int
		want  bool
	}{{0, false}, {1, true}, {5, false}} {
		if got := n.waiting("ch", c.limit); got != c.want {
			t.Errorf("with requests of 1 permit waiting, a request of %d waits behind them: %v, want %v", c.limit, got, c.want)
		}
	}
	n.chans["ch"].waiters = append(n.chans["ch"].waiters, five, lease)
	for _, c := range []struct {
		limit int
		want  bool
	}{{0, true}, {1, true}, {5, true}, {6, false}} {
		if got := n.waiting("ch", c.limit); got != c.want {
			t.Errorf("with requests of 0, 1 and 5 waiting, a request of %d waits behind them: %v, want %v", c.limit, got, c.want)
		}
	}

	s := &subscription{waiters: []*waiter{one, oneMore, five, lease, fair}}
	s.wakeOne()
	for _, c := range []struct {
		what string
		w    *waiter
		want bool
	}{{"the first of 1", one, true}, {"the second of 1", oneMore, false}, {"the first of 5", five, true},
		{"the first lease", lease, true}, {"the fair head", fair, true}} {
		if got := len(c.w.wake) == 1; got != c.want {
			t.Errorf("a release woke %s: %v, want %v", c.what, got, c.want)
		}
	}
}

// In sharded mode the answer to the subscriber's own SUNSUBSCRIBE is no
// news, while the server's own sunsubscribe (the slot moved away) is
// reported to the subscriber, whether or not anyone waits on the channel
// now: someone may by the time the subscriber looks. Without the count of
// answers due, a waiter that comes back to a channel just let go would
// have it subscribed again, and its node avoided, for nothing.
func TestShardUnsubscribeAnswers(t *testing.T) {
	n := &notifier{chans: map[string]*subscription{"ch": {}}, sh: &shards{}, kick: make(chan struct{}, 1)}
	sc := &shardConn{addr: "a", unsubs: map[string]int{"ch": 1}}
	drop := &redis.Subscription{Kind: "sunsubscribe", Channel: "ch"}
	n.deliverShard(sc, drop)
	if len(n.sh.events) != 0 || len(sc.unsubs) != 0 {
		t.Fatalf("the answer to an SUNSUBSCRIBE: events %v, answers due %v", n.sh.events, sc.unsubs)
	}
	n.deliverShard(sc, drop)
	delete(n.chans, "ch")
	n.deliverShard(sc, drop)
	if len(n.sh.events) != 2 || n.sh.events[0].channel != "ch" || n.sh.events[1].channel != "ch" {
		t.Fatalf("the server's sunsubscribes: events %v, want two of ch", n.sh.events)
	}
	for _, c := range []struct {
		err  error
		slot int
		ok   bool
	}{
		{redisErr("MOVED 3999 127.0.0.1:6381"), 3999, true},
		{redisErr("ASK 3999 127.0.0.1:6381"), 0, false},
		{redisErr("ERR unknown command 'ssubscribe'"), 0, false},
		{nil, 0, false},
	} {
		if slot, ok := movedSlot(c.err); slot != c.slot || ok != c.ok {
			t.Errorf("movedSlot(%v) = %d, %v; want %d, %v", c.err, slot, ok, c.slot, c.ok)
		}
	}
}

// redisErr is an error reply of a server, as go-redis returns them.
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}
