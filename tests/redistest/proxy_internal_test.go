package redistest

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A connection dialed to the old target while SetTarget and
// ResetConnections ran must not survive on the old target: after a failover
// that server may come back as a stale primary.
func TestProxyDialRacingSetTarget(t *testing.T) {
	a := Start(t)
	b := Start(t)
	p := StartProxy(t, a.Addr())

	dialed, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hold := func() {
		once.Do(func() {
			close(dialed)
			<-resume
		})
	}
	p.afterDial.Store(&hold)

	c := redis.NewClient(&redis.Options{Addr: p.Addr(), PoolSize: 1, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Set(ctx, "where", "x", 0).Err() }()

	<-dialed // the proxy dialed a, and has not registered the link yet
	p.SetTarget(b.Addr())
	p.ResetConnections() // misses the link: not registered yet
	close(resume)
	<-done // whatever it answered: the link to a is closed, or carried it

	// Every later command reaches b, never a through a surviving link.
	for range 20 {
		_ = c.Set(ctx, "where", "b", 0).Err() // the dropped link fails one
	}
	ac, bc := a.NewClient(), b.NewClient()
	defer ac.Close()
	defer bc.Close()
	if v := ac.Get(ctx, "where").Val(); v == "b" {
		t.Fatalf("a command went to the old target through a link dialed before SetTarget")
	}
	if v := bc.Get(ctx, "where").Val(); v != "b" {
		t.Fatalf("the new target has %q", v)
	}
}

// Close closes the proxy's listener. (Dialing its address afterwards would
// prove nothing: a parallel test's server may have taken the freed port,
// which made an external check of this fail for no bug.)
func TestProxyCloseStopsListening(t *testing.T) {
	s := Start(t)
	p, err := NewProxy(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
}
