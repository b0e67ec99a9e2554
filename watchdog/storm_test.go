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

// stormy renews each lease in 1ms, or in 2ms while an acquisition storm
// shares the server with it.
type stormy struct{ storm atomic.Bool }

func (s *stormy) Renew(ctx context.Context, batch []watchdog.Renewal[string], errs []error) {
	per := time.Millisecond
	if s.storm.Load() {
		per *= 2
	}
	select {
	case <-time.After(time.Duration(len(batch)) * per):
	case <-ctx.Done():
		for i := range errs {
			errs[i] = ctx.Err()
		}
	}
}

// Admission counts the capacity that renewals have without an acquisition
// storm (L2, docs/design.md): four workers renew 1,000 leases a second
// each alone (a capacity of 4,000, three quarters of it 3,000) and 500
// while a storm shares the server (1,500). A storm takes the leases from
// 500 to 1,800 renewed every second: they are all kept, the renewals of a
// storm keeping up, and a watchdog with CPU to spare is not behind, where
// one short of CPU counts what the storm left it and is.
func TestStormIsNotTheRenewalsCapacity(t *testing.T) {
	for _, short := range []bool{false, true} {
		t.Run(fmt.Sprint("cpuShort=", short), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &stormy{}
				w := watchdog.New[string](r, watchdog.Config{Drift: drift, Workers: 4, Parallel: 4, BatchSize: 200})
				defer w.Close()
				watchdog.PinCPUShort(w, short)
				var lost atomic.Int64
				n := 0
				add := func() {
					n++
					if _, err := w.Add(fmt.Sprint("l", n), 6*time.Second, time.Now(), time.Second, true, watchdog.LostFunc(func(error) { lost.Add(1) })); err != nil {
						t.Fatal(err)
					}
				}
				for range 500 {
					add()
				}
				time.Sleep(5 * time.Second) // renewed alone: measured quiet
				r.storm.Store(true)
				for range 1300 {
					add()
					time.Sleep(4 * time.Millisecond) // over 5.2s: more than a batch's tenth added while each is out
				}
				if got := w.Behind(); got != short {
					t.Errorf("Behind() = %t at 1,800 renewals a second during a storm, want %t", got, short)
				}
				if r := w.BehindReason(); short && r != watchdog.DemandOverCapacity {
					t.Errorf("BehindReason() = %v, want DemandOverCapacity", r)
				}
				// The figures a refusal reports are those it weighed: the
				// storm's rate (500 a worker) while short of CPU, the quiet
				// one (1,000) otherwise.
				l := w.Load()
				want := 1000.0
				if short {
					want = 500
				}
				if l.Workers != 4 || l.ShortOfCPU != short || l.Demand != 1800 || l.PerWorker < 0.9*want || l.PerWorker > 1.1*want {
					t.Errorf("Load() = %+v, want 1,800 called for, 4 workers at about %.0f, short of CPU %t", l, want, short)
				}
				if over := l.Demand > 0.75*l.Capacity(); over != short {
					t.Errorf("Load() %v: over three quarters of capacity %t, want %t as Behind", l, over, short)
				}
				r.storm.Store(false)
				time.Sleep(5 * time.Second)
				if l := lost.Load(); l > 0 {
					t.Fatalf("%d of %d leases lost", l, n)
				}
			})
		})
	}
}
