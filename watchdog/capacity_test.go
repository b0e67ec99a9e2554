package watchdog_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure/watchdog"
)

// farServer answers every call after a round trip of rtt, plus per for
// each renewal: a link that is slow, a server and a process that are not.
type farServer struct{ rtt, per time.Duration }

func (s farServer) Renew(ctx context.Context, batch []watchdog.Renewal[string], errs []error) {
	select {
	case <-time.After(s.rtt + time.Duration(len(batch))*s.per):
	case <-ctx.Done():
		for i := range errs {
			errs[i] = ctx.Err()
		}
	}
}

// L3: a slow link is not overload. Four workers counted as one (Parallel
// 1: what DefaultParallel gives on two or three cores), CPU to spare, every
// answer 200ms late, and 20µs of work a renewal: 12,000 leases of a 10s
// TTL call for 3,600 renewals a second, where the four workers, waiting
// out the link together, carry about 18,000 (1,000 a batch every 220ms
// each). They are taken as a process takes them through that link, 64 at
// a time, each after a round trip. The watchdog counted the link's 200ms
// as work, one worker's 4,500 a second, and said it was behind for
// DemandOverCapacity from about 3,400, while it renewed every lease in
// time.
func TestSlowLinkIsNotOverCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rtt, n, ttl = 200 * time.Millisecond, 12000, 10 * time.Second
		w := watchdog.New[string](farServer{rtt: rtt, per: 20 * time.Microsecond}, watchdog.Config{Drift: drift, Workers: 4, Parallel: 1})
		defer w.Close()
		watchdog.PinCPUShort(w, false)
		var lost atomic.Int64
		for i := 0; i < n; i += 64 {
			for j := i; j < min(i+64, n); j++ {
				if _, err := w.Add(fmt.Sprint("l", j), ttl, time.Now(), ttl/3, true, watchdog.LostFunc(func(error) { lost.Add(1) })); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(rtt)
		}
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if r := w.BehindReason(); r != watchdog.NotBehind {
				t.Fatalf("behind (%v) at %d leases over a 200ms link: %v", r, n, w.Load())
			}
		}
		if l := lost.Load(); l > 0 {
			t.Fatalf("%d of %d leases lost", l, n)
		}
		t.Logf("%v", w.Load())
	})
}

// The other way round: work is not taken for the link. Renewals that cost
// 1ms each and no round trip, taken 100 every 100ms (batches of many
// sizes), at Parallel 1 of 4 workers: 2,700 leases renewed every 3s call
// for 900 a second, over three quarters of the one worker's 1,000 counted.
// The watchdog is behind for DemandOverCapacity, and counts no link: had
// it taken the quickest answer (a small batch's) for the link, it would
// have counted twice the capacity and more.
func TestWorkIsNotTakenForTheLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := watchdog.New[string](costly{per: time.Millisecond}, watchdog.Config{Drift: drift, Workers: 4, Parallel: 1})
		defer w.Close()
		watchdog.PinCPUShort(w, false)
		for i := range 2700 {
			if _, err := w.Add(fmt.Sprint("l", i), 9*time.Second, time.Now(), 3*time.Second, true, watchdog.LostFunc(func(error) {})); err != nil {
				t.Fatal(err)
			}
			if i%100 == 99 {
				time.Sleep(100 * time.Millisecond)
			}
		}
		time.Sleep(5 * time.Second)
		if r, l := w.BehindReason(), w.Load(); r != watchdog.DemandOverCapacity || l.Link > 10*time.Millisecond {
			t.Fatalf("BehindReason() = %v with 900 renewals/s called for, want DemandOverCapacity: %v", r, l)
		}
	})
}
