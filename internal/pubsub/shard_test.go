package pubsub

import (
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// counts is an Owner that counts what it is told.
type counts struct{ messages, armed, lost, missed int }

func (c *counts) Message(string, string) { c.messages++ }
func (c *counts) Armed(string)           { c.armed++ }
func (c *counts) Lost(string)            { c.lost++ }
func (c *counts) Missed()                { c.missed++ }

// In sharded mode the answer to the subscriber's own SUNSUBSCRIBE is no
// news, while the server's own sunsubscribe (the slot moved away) is
// reported to the subscriber, whether or not the channel is wanted now: it
// may be by the time the subscriber looks. Without the count of answers
// due, a user that comes back to a channel just let go would have it
// subscribed again, and its node avoided, for nothing.
func TestShardUnsubscribeAnswers(t *testing.T) {
	o := &counts{}
	h := &Hub{mu: &sync.Mutex{}, o: o, wanted: map[string]bool{"ch": true}, armed: map[string]bool{}, sh: &shards{}, kick: make(chan struct{}, 1)}
	sc := &shardConn{addr: "a", unsubs: map[string]int{"ch": 1}}
	drop := &redis.Subscription{Kind: "sunsubscribe", Channel: "ch"}
	h.deliverShard(sc, drop)
	if len(h.sh.events) != 0 || len(sc.unsubs) != 0 {
		t.Fatalf("the answer to an SUNSUBSCRIBE: events %v, answers due %v", h.sh.events, sc.unsubs)
	}
	h.deliverShard(sc, drop)
	delete(h.wanted, "ch")
	h.deliverShard(sc, drop)
	if len(h.sh.events) != 2 || h.sh.events[0].channel != "ch" || h.sh.events[1].channel != "ch" {
		t.Fatalf("the server's sunsubscribes: events %v, want two of ch", h.sh.events)
	}
	h.deliverShard(sc, &redis.Subscription{Kind: "ssubscribe", Channel: "ch"})
	h.deliverShard(sc, &redis.Message{Channel: "ch", Payload: "0"})
	if *o != (counts{messages: 1}) {
		t.Fatalf("a channel nobody wants: the owner heard %+v, want its message only", *o)
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
