package lease_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// checker records critical sections per name and reports overlaps and
// fences that do not strictly increase.
type checker struct {
	mu       sync.Mutex
	inside   map[string]string // name -> holder inside
	last     map[string]int64
	sections int
	errs     []string
}

func newChecker() *checker {
	return &checker{inside: map[string]string{}, last: map[string]int64{}}
}

func (c *checker) enter(name, holder string, fence int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if other, ok := c.inside[name]; ok {
		c.errs = append(c.errs, fmt.Sprintf("%s: %s entered while %s was inside", name, holder, other))
	}
	if fence <= c.last[name] {
		c.errs = append(c.errs, fmt.Sprintf("%s: fence %d after %d", name, fence, c.last[name]))
	}
	c.inside[name], c.last[name] = holder, fence
	c.sections++
}

func (c *checker) leave(name, holder string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inside[name] == holder {
		delete(c.inside, name)
	}
}

func TestMutualExclusionUnderContention(t *testing.T) {
	srv := redistest.Start(t)
	chk := newChecker()
	names := []string{"alpha", "beta"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var lost atomic.Int64
	for mi := range 3 {
		m := newManager(t, srv.Client(t), lease.WithTTL(time.Second))
		for g := range 16 {
			holder := fmt.Sprintf("m%d/g%d", mi, g)
			wg.Go(func() {
				for ctx.Err() == nil {
					name := names[rand.IntN(len(names))]
					l, err := m.Acquire(ctx, name)
					if err != nil {
						if ctx.Err() == nil {
							t.Errorf("%s: acquire: %v", holder, err)
						}
						return
					}
					chk.enter(name, holder, l.Fence())
					time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
					// Leave before releasing: once the delete reaches the
					// server, another holder may enter.
					chk.leave(name, holder)
					if l.Err() != nil {
						lost.Add(1)
					}
					if err := l.Release(context.Background()); err != nil {
						t.Errorf("%s: release: %v", holder, err)
					}
				}
			})
		}
	}
	wg.Wait()
	for _, e := range chk.errs {
		t.Error(e)
	}
	if chk.sections < 100 {
		t.Errorf("only %d critical sections: the test exercised nothing", chk.sections)
	}
	if lost.Load() != 0 {
		t.Errorf("%d leases lost without any fault", lost.Load())
	}
	t.Logf("%d critical sections, no overlap", chk.sections)
}

// The mutual-exclusion property itself (S1), under partitions: one of three
// managers is cut off from Redis and reconnected over and over while all
// contend for two names. Whenever a holder enters, every other holder of the
// name must already have seen its lease context cancelled.
func TestMutualExclusionWithPartitions(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	cut := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cut.Close() })
	// A wider drift margin than the default keeps the test about logic,
	// not about how late the race detector's scheduler runs a timer.
	opts := []lease.Option{lease.WithTTL(time.Second), lease.WithDrift(0.05, 5*time.Millisecond), lease.WithOpTimeout(300 * time.Millisecond)}
	// The cut-off manager waits in the fair queue: its release messages
	// are lost to the black holes, and polling it would hardly ever win
	// the names from managers woken by messages, so the partitions would
	// rarely catch it holding one.
	managers := []*lease.Manager{newManager(t, cut, append(opts, lease.WithFair(true))...), newManager(t, srv.Client(t), opts...), newManager(t, srv.Client(t), opts...)}

	var (
		mu         sync.Mutex
		inside     = map[string][]*lease.Lease{}
		last       = map[string]int64{}
		violations []string
		sections   atomic.Int64
		losses     atomic.Int64
	)
	enter := func(l *lease.Lease) {
		mu.Lock()
		defer mu.Unlock()
		for _, other := range inside[l.Name()] {
			if other.Context().Err() == nil {
				violations = append(violations, fmt.Sprintf("%s: fence %d entered while fence %d still held it", l.Name(), l.Fence(), other.Fence()))
			}
		}
		if l.Fence() <= last[l.Name()] {
			violations = append(violations, fmt.Sprintf("%s: fence %d after %d", l.Name(), l.Fence(), last[l.Name()]))
		}
		last[l.Name()] = l.Fence()
		inside[l.Name()] = append(inside[l.Name()], l)
		sections.Add(1)
	}
	leave := func(l *lease.Lease) {
		mu.Lock()
		defer mu.Unlock()
		ls := inside[l.Name()]
		for i, x := range ls {
			if x == l {
				inside[l.Name()] = append(ls[:i], ls[i+1:]...)
				break
			}
		}
	}

	run, stop := context.WithTimeout(context.Background(), 6*time.Second)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { // the fault schedule
		for run.Err() == nil {
			proxy.BlackHole(true)
			sleepCtx(run, 1500*time.Millisecond)
			proxy.BlackHole(false)
			sleepCtx(run, 700*time.Millisecond)
		}
	})
	names := []string{"alpha", "beta"}
	for mi, m := range managers {
		for range 8 {
			wg.Go(func() {
				for run.Err() == nil {
					actx, cancel := context.WithTimeout(run, 300*time.Millisecond)
					l, err := m.Acquire(actx, names[rand.IntN(2)])
					cancel()
					if err != nil {
						continue // timed out behind the black hole, or the run ended
					}
					enter(l)
					// The cut-off manager holds long enough to be cut off
					// while holding; the others hand over quickly.
					hold := time.Duration(rand.IntN(100)) * time.Millisecond
					if mi == 0 {
						hold = 2 * time.Second
					}
					sleepCtx(l.Context(), hold)
					if l.Err() == lease.ErrLost {
						losses.Add(1)
					}
					leave(l)
					rctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
					_ = l.Release(rctx)
					cancel()
					if mi != 0 {
						// Woken by release messages, the managers that
						// reach Redis would otherwise hand the names to
						// each other and starve the cut-off one, whose
						// messages a black hole swallows.
						sleepCtx(run, time.Duration(rand.IntN(200))*time.Millisecond)
					}
				}
			})
		}
	}
	wg.Wait()
	proxy.BlackHole(false)
	for _, v := range violations {
		t.Error(v)
	}
	if losses.Load() == 0 || sections.Load() < 20 {
		t.Fatalf("%d sections, %d losses: the partitions exercised nothing", sections.Load(), losses.Load())
	}
	t.Logf("%d critical sections, %d leases lost to partitions, no overlap", sections.Load(), losses.Load())
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
