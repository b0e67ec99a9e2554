package pubsub

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/tests/redistest"
)

var redisAddr string

func TestMain(m *testing.M) {
	redistest.Main(m, func(addr string) { redisAddr = addr })
}

// user is a Hub's user: its mutex, and an Owner that counts.
type user struct {
	mu  sync.Mutex
	o   counts
	hub *Hub
}

func newUser(t *testing.T, c redis.UniversalClient, sharded bool) *user {
	u := &user{}
	u.hub = New(c, sharded, &u.mu, &u.o)
	t.Cleanup(u.hub.Close)
	return u
}

// await waits, generously, until cond holds under u.mu.
func (u *user) await(t *testing.T, what string, cond func(o counts) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		u.mu.Lock()
		o := u.o
		u.mu.Unlock()
		if cond(o) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the owner heard %+v", what, o)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A channel wanted again before the subscriber dropped it is subscribed
// still: no confirmation will come, so the Hub says it is armed at once.
// Without that, a lock whose last waiter left and whose next came at once
// would wait for a confirmation that never comes.
func TestWantedAgainIsArmedAtOnce(t *testing.T) {
	srv := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { _ = srv.Close() })
	cluster := redistest.NewCluster(t, 3, 0).Client(t)
	t.Run("classic", func(t *testing.T) { wantedAgain(t, srv, false) })
	t.Run("sharded", func(t *testing.T) { wantedAgain(t, cluster, true) })
}

func wantedAgain(t *testing.T, c redis.UniversalClient, sharded bool) {
	u := newUser(t, c, sharded)
	u.mu.Lock()
	u.hub.Want("again")
	u.mu.Unlock()
	u.await(t, "the first subscription", func(o counts) bool { return o.armed == 1 })
	u.mu.Lock()
	u.hub.Drop("again")
	u.hub.Want("again")
	armed := u.o.armed
	u.mu.Unlock()
	if armed != 2 {
		t.Fatalf("wanted again while subscribed: armed %d times, want 2", armed)
	}
	publish := "PUBLISH"
	if sharded {
		publish = "SPUBLISH"
	}
	if err := c.Do(context.Background(), publish, "again", "x").Err(); err != nil {
		t.Fatal(err)
	}
	u.await(t, "a message after", func(o counts) bool { return o.messages == 1 })
}

// After the server drops the classic connection, the Owner is told that
// messages may have been missed, and each channel is armed anew once
// go-redis has subscribed it again: a message from then on is heard.
func TestReconnectionArmsAgain(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	u := newUser(t, c, false)
	u.mu.Lock()
	u.hub.Want("a")
	u.hub.Want("b")
	u.mu.Unlock()
	u.await(t, "the subscriptions", func(o counts) bool { return o.armed == 2 })
	ctx := context.Background()
	if n, err := c.ClientKillByFilter(ctx, "TYPE", "pubsub").Result(); err != nil || n != 1 {
		t.Fatalf("CLIENT KILL TYPE pubsub: %d, %v", n, err)
	}
	u.await(t, "after the kill", func(o counts) bool { return o.missed >= 1 && o.armed == 4 })
	if err := c.Publish(ctx, "b", "x").Err(); err != nil {
		t.Fatal(err)
	}
	u.await(t, "a message after", func(o counts) bool { return o.messages == 1 })
}
