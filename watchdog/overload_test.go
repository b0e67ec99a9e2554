package watchdog_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure/watchdog"
)

// gate is a Renewer whose every call waits until the test lets it go, and
// which records the order in which items were sent.
type gate struct {
	mu   sync.Mutex
	sent []string
	open chan struct{}
}

func (g *gate) Renew(ctx context.Context, batch []watchdog.Renewal[string], errs []error) {
	g.mu.Lock()
	for _, b := range batch {
		g.sent = append(g.sent, b.Item)
	}
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-ctx.Done():
		for i := range errs {
			errs[i] = ctx.Err()
		}
	}
}

func (g *gate) order() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.sent...)
}

// When more renewals are due than the workers can send, the leases nearest
// their loss go first, whatever order they fell due in; and the watchdog
// says it is behind once one of them waits, unsent, within a renewal
// interval of its loss. The server never answers here: each call gives up
// after half an interval.
func TestBehindRenewsNearestLossFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gate{open: make(chan struct{})}
		w := watchdog.New[string](g, watchdog.Config{Drift: drift, Workers: 1, BatchSize: 1})
		defer w.Close()
		now := time.Now()
		// All fall due at 1s; added farthest loss first.
		names := []string{"ttl20s", "ttl10s"}
		ttls := []time.Duration{20 * time.Second, 10 * time.Second}
		for i := range 7 {
			names, ttls = append(names, fmt.Sprint("ttl5s-", i)), append(ttls, 5*time.Second)
		}
		names, ttls = append(names, "ttl3s"), append(ttls, 3*time.Second)
		for i, name := range names {
			if _, err := w.Add(name, ttls[i], now, time.Second, true, watchdog.LostFunc(func(error) {})); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := g.order(); len(got) != 1 || got[0] != "ttl3s" {
			t.Fatalf("sent first %v, want [ttl3s]", got)
		}
		if w.Behind() {
			t.Fatal("behind with every waiting lease more than an interval from its loss")
		}
		// The 5s leases are lost at about 4.9s: within their 1s interval
		// from 3.9s, and one call in half a second cannot send them all.
		time.Sleep(3 * time.Second)
		if r := w.BehindReason(); r != watchdog.WaitingForWorker {
			t.Fatalf("BehindReason() = %v with 5s leases waiting for the one worker near their loss (sent %v)", r, g.order())
		}
		time.Sleep(20 * time.Second)
		close(g.open)
		synctest.Wait()
		// Each lease's first renewal, in order: the nearest loss first.
		first := map[string]int{}
		for i, name := range g.order() {
			if _, ok := first[name]; !ok {
				first[name] = i
			}
		}
		last5 := 0
		for i := range 7 {
			last5 = max(last5, first[fmt.Sprint("ttl5s-", i)])
		}
		if !(first["ttl3s"] < last5 && last5 < first["ttl10s"] && first["ttl10s"] < first["ttl20s"]) {
			t.Fatalf("first sent in the order %v, want ttl3s, the 5s leases, ttl10s, ttl20s", g.order())
		}
		if w.Behind() {
			t.Fatal("still behind with nothing waiting")
		}
	})
}

// slowServer answers every renewal, after 600ms: slow, not gone.
type slowServer struct{}

func (slowServer) Renew(ctx context.Context, batch []watchdog.Renewal[string], errs []error) {
	select {
	case <-time.After(600 * time.Millisecond):
	case <-ctx.Done():
		for i := range errs {
			errs[i] = ctx.Err()
		}
	}
}

// A server that answers slower than half an interval (when a renewal was
// given up before) keeps its leases: once a batch is given up, the next
// ones wait for twice the round trips seen, up to an interval, instead of
// abandoning every answer and sending the same renewals again until the
// lease is lost.
func TestSlowServerKeepsLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := watchdog.New[string](slowServer{}, watchdog.Config{Drift: drift})
		defer w.Close()
		lost := make(chan error, 1)
		if _, err := w.Add("slow", 3*time.Second, time.Now(), time.Second, true, watchdog.LostFunc(func(err error) { lost <- err })); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Second)
		select {
		case err := <-lost:
			t.Fatalf("lost to a server that answers in 600ms with a 1s interval: %v", err)
		default:
		}
	})
}

// costly is a Renewer whose every renewal costs the same time, in each
// call: a process (or a server) that can renew only so many a second.
type costly struct{ per time.Duration }

func (c costly) Renew(ctx context.Context, batch []watchdog.Renewal[string], errs []error) {
	select {
	case <-time.After(time.Duration(len(batch)) * c.per):
	case <-ctx.Done():
		for i := range errs {
			errs[i] = ctx.Err()
		}
	}
}

// L2: a caller that adds leases whenever the watchdog is not behind (as
// lease's acquisitions do) is stopped before the held leases are at risk.
// Four workers renewing 1ms a lease carry 4,000 renewals a second, 12,000
// leases of a 3s TTL at most; the caller, once a thousand leases are held
// and renewed, offers 10 new ones a millisecond for 20s. A brake that
// waited for a lease to be late let so many in that renewals fell behind
// for good, and held leases were lost.
func TestBehindBeforeHeldLeasesAreAtRisk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := watchdog.New[string](costly{per: time.Millisecond}, watchdog.Config{Drift: drift})
		defer w.Close()
		var lost atomic.Int64
		added, refused := 0, 0
		add := func() {
			added++
			if _, err := w.Add(fmt.Sprint("l", added), 3*time.Second, time.Now(), time.Second, true, watchdog.LostFunc(func(error) { lost.Add(1) })); err != nil {
				t.Fatal(err)
			}
		}
		for range 1000 {
			add()
		}
		time.Sleep(3 * time.Second) // a few rounds: the watchdog knows what it can do
		for range 20000 {
			for range 10 {
				if w.Behind() {
					refused++
					continue
				}
				add()
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		t.Logf("%d added, %d refused, %d lost", added, refused, lost.Load())
		if lost.Load() > 0 || refused == 0 {
			t.Fatalf("%d of %d leases lost (%d refused)", lost.Load(), added, refused)
		}
	})
}

// L2, when held leases cannot all be renewed at their interval (the
// capacity fell after they were taken): renewals sent nearest loss first
// stretch each lease's interval towards its margin, and a lease is lost
// only when even that cannot be kept. Four workers renewing 1ms a lease
// send 4,000 renewals a second; 6,000 leases of a 3s TTL call for 6,000 at
// their interval, and fewer than 4,000 renewed once in their 1.9s margin:
// every one is kept. (Renewing the oldest first instead kept 4,890: it
// renews old leases at their interval while the newest starve.)
func TestOverloadStretchesRatherThanLoses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := watchdog.New[string](costly{per: time.Millisecond}, watchdog.Config{Drift: drift})
		defer w.Close()
		const n = 6000
		var lost atomic.Int64
		for i := range n {
			if _, err := w.Add(fmt.Sprint(i), 3*time.Second, time.Now(), time.Second, true, watchdog.LostFunc(func(error) { lost.Add(1) })); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(20 * time.Second)
		if l := lost.Load(); l > 0 {
			t.Fatalf("%d of %d leases lost to a load they could be carried through", l, n)
		}
	})
}

// Behind counts Config.Parallel workers' renewals a second: four workers
// renewing 1ms a lease carry 4,000 renewals a second. 2,000 leases renewed
// every second are behind for a watchdog that counts one worker (its
// three quarters are 750 a second), not for one that counts four (3,000),
// which keeps them all and is behind only past 3,000.
func TestBehindCountsParallelWorkers(t *testing.T) {
	for _, parallel := range []int{1, 4} {
		t.Run(fmt.Sprint("parallel=", parallel), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := watchdog.New[string](costly{per: time.Millisecond}, watchdog.Config{Drift: drift, Workers: 4, Parallel: parallel})
				defer w.Close()
				var lost atomic.Int64
				added := 0
				add := func(n int) {
					for range n {
						added++
						if _, err := w.Add(fmt.Sprint("l", added), 3*time.Second, time.Now(), time.Second, true, watchdog.LostFunc(func(error) { lost.Add(1) })); err != nil {
							t.Fatal(err)
						}
					}
				}
				add(2000)
				time.Sleep(5 * time.Second) // rounds measured
				if got, want := w.Behind(), parallel == 1; got != want {
					t.Fatalf("Behind() = %t with 2,000 renewals a second, want %t", got, want)
				}
				if parallel == 1 {
					return
				}
				if lost.Load() > 0 {
					t.Fatalf("%d of 2,000 leases lost", lost.Load())
				}
				add(1500)
				time.Sleep(5 * time.Second)
				if !w.Behind() {
					t.Fatal("not behind with 3,500 renewals a second called for, over three quarters of four workers' 4,000")
				}
			})
		})
	}
}

func TestDefaultParallel(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range []struct{ procs, workers, want int }{
		{1, 4, 1}, {2, 4, 1}, {3, 4, 1}, {4, 4, 2}, {8, 4, 4}, {16, 4, 4}, {16, 2, 2},
	} {
		runtime.GOMAXPROCS(c.procs)
		if got := watchdog.DefaultParallel(c.workers); got != c.want {
			t.Errorf("GOMAXPROCS %d, %d workers: DefaultParallel = %d, want %d", c.procs, c.workers, got, c.want)
		}
	}
}
