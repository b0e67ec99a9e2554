package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// A SUBSCRIBE that fails (here: the server refuses the pub/sub connection,
// its maxclients reached) must leave nothing behind: once the waiters are
// gone and the server takes connections again, no subscription nobody
// waits on may come back with go-redis's reconnection.
func TestFailedSubscribeLeavesNoSubscription(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	c := srv.Client(t)
	m := newManager(t, c, lease.WithTTL(time.Minute))
	ctx := context.Background()
	const names = 20
	for i := range names {
		if _, err := m.Acquire(ctx, fmt.Sprintf("n%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Refuse every new connection: the manager's pool and raw keep theirs.
	info := raw.Info(ctx, "clients").Val()
	connected := 0
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "connected_clients:"); ok {
			connected, _ = strconv.Atoi(v)
		}
	}
	if err := raw.ConfigSet(ctx, "maxclients", strconv.Itoa(connected)).Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range names {
		wg.Go(func() {
			wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			if _, err := m.Acquire(wctx, fmt.Sprintf("n%d", i)); !errors.Is(err, lease.ErrNotAcquired) {
				t.Errorf("waiter on a held name: %v", err)
			}
		})
	}
	wg.Wait()
	if err := raw.ConfigSet(ctx, "maxclients", "10000").Err(); err != nil {
		t.Fatal(err)
	}
	// The notifier's connection comes back within a few of its idle
	// periods (2s); whatever go-redis resubscribes then shows here.
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		if chans := raw.PubSubChannels(ctx, "tenure:*").Val(); len(chans) > 0 {
			t.Fatalf("%d subscriptions nobody waits on, such as %v", len(chans), chans[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	// And the notifier still works: a waiter is subscribed while it waits.
	done := make(chan error, 1)
	go func() {
		_, err := m.Acquire(ctx, "n0")
		done <- err
	}()
	waitFor(t, 10*time.Second, func() bool { return len(raw.PubSubChannels(ctx, "tenure:{n0}:*").Val()) == 1 })
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("waiter after Close: %v", err)
	}
}
