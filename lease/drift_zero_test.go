package lease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// TestNoOneTakesANameBeforeTheLocalDeadline checks S2 at its edge, with no
// drift at all: a lease of TTL 10.99 ms, not renewed, and another client
// spinning on SET NX for the same key. Whenever that client's SET NX is
// answered, the server ran it before the answer arrived, so an answer
// received before the first lease's Deadline would mean the server let
// the key go before sent + ttl: the local deadline would not be before the
// server's expiry. The server keeps keys to the millisecond from its own
// clock at the command (the TTL rounded up), so the margin is at least the
// time from the request's send to its execution. The independent suite saw
// one such take over 768 on Redis 8.0.2 under load, 133 µs early; the same
// check here, on every server CI runs, has found none (the smallest margin
// is logged). An acquisition answered after its whole TTL (a loaded
// machine) has no deadline to check and is counted, not failed; more than
// half of them would leave too little checked. A server-side time earlier than the client's send would show
// here as a failure; a take-over measured from when the other client
// called, rather than from its answer, can look early by a round trip.
func TestNoOneTakesANameBeforeTheLocalDeadline(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	const ttl = 10990 * time.Microsecond
	m := newManager(t, srv.Client(t), lease.WithTTL(ttl), lease.WithDrift(0, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	least := time.Hour
	const tries = 256
	late := 0
	for i := range tries {
		name := fmt.Sprint("edge", i)
		l, err := m.TryAcquire(ctx, name, lease.WithAutoRenew(false))
		if errors.Is(err, lease.ErrNotAcquired) {
			// Won, but answered after its 10.99 ms were spent (a loaded
			// machine): the manager gives it back, and there is no
			// deadline to check. CI's Redis 8 run met one.
			late++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for {
			ok, err := raw.SetNX(ctx, "tenure:{"+name+"}", "other", time.Minute).Result()
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				margin := time.Until(l.Deadline())
				if margin > 0 {
					t.Fatalf("try %d: another client took %q %v before the lease's local deadline (TTL %v, no drift)", i, name, margin, ttl)
				}
				least = min(least, -margin)
				break
			}
		}
	}
	if late > tries/2 {
		t.Fatalf("%d of %d acquisitions answered after their TTL: too few takes checked", late, tries)
	}
	t.Logf("%d takes, none before the local deadline; the smallest margin after it: %v (%d acquisitions answered too late to check)", tries-late, least, late)
}
