package lease_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// timeoutHook counts the commands and pipelines go-redis ended with a
// timeout: a call hung on a silently dead connection that returned.
type timeoutHook struct{ n *atomic.Int64 }

func (h timeoutHook) count(err error) {
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		h.n.Add(1)
	}
}

func (timeoutHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h timeoutHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.count(err)
		return err
	}
}
func (h timeoutHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.count(err)
		return err
	}
}

// silentCase is one lease whose pooled connection dies silently: its TTL
// and interval, when it first dies (a fraction of the interval past the
// second renewal), how many times in a row, and whether its client ends a
// call with its context (ContextTimeoutEnabled) or, as go-redis's
// defaults do, at its 3s ReadTimeout.
type silentCase struct {
	ttl, iv    time.Duration
	first      float64
	deaths     int
	ctxTimeout bool
}

func (sc silentCase) String() string {
	return fmt.Sprintf("ContextTimeoutEnabled=%t/interval=%v/deaths=%d", sc.ctxTimeout, sc.iv, sc.deaths)
}

// silentLeases runs the cases at once, each through a proxy of its own to
// srv (they mostly sleep), and fails for each one whose lease was lost.
func silentLeases(t *testing.T, srv *redistest.Server, cases []silentCase) {
	raw := srv.Client(t)
	errs := make([]error, len(cases))
	var wg sync.WaitGroup
	for i, sc := range cases {
		proxy := redistest.StartProxy(t, srv.Addr())
		c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: sc.ctxTimeout})
		var timeouts atomic.Int64
		c.AddHook(timeoutHook{&timeouts})
		t.Cleanup(func() { _ = c.Close() })
		m := newManager(t, c, lease.WithTTL(sc.ttl), lease.WithRenewInterval(sc.iv))
		wg.Go(func() { errs[i] = sc.run(m, proxy, raw, &timeouts, fmt.Sprint("silent-", i)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("%v: %v", cases[i], err)
		}
	}
}

// run holds a lease named name on m and silences proxy's connections as
// sc says. It returns why the lease was lost, if it was.
func (sc silentCase) run(m *lease.Manager, proxy *redistest.Proxy, raw *redis.Client, timeouts *atomic.Int64, name string) error {
	ctx := context.Background()
	start := time.Now()
	l, err := m.TryAcquire(ctx, name)
	if err != nil {
		return err
	}
	time.Sleep(time.Until(start.Add(time.Duration((2 + sc.first) * float64(sc.iv)))))
	for k := range sc.deaths {
		before := timeouts.Load()
		if n := proxy.Silence(); n == 0 {
			return errors.New("no connection to silence")
		}
		for end := time.Now().Add(30 * time.Second); timeouts.Load() == before && l.Err() == nil; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				return fmt.Errorf("death %d: no call on the silenced connection returned", k+1)
			}
		}
		if l.Err() != nil {
			return fmt.Errorf("lost at death %d of %d: %w", k+1, sc.deaths, context.Cause(l.Context()))
		}
	}
	time.Sleep(2 * sc.ttl)
	if l.Err() != nil {
		return fmt.Errorf("lost after the deaths: %w", context.Cause(l.Context()))
	}
	if got, err := raw.Get(ctx, "tenure:{"+name+"}").Result(); err != nil || got != l.Token() {
		return fmt.Errorf("the key holds %q (%v), want the lease's token", got, err)
	}
	return l.Release(ctx)
}

// L1 on a real redis-server: a pooled connection that dies silently (a
// proxy that stops forwarding on it), two and three times in a row, each
// time once the call hung on the one before has returned, costs no lease.
// TTL 3s at the default interval: the first death comes half way between
// two renewals, the renewal after it hangs (until go-redis's 3s
// ReadTimeout, by default), and a second attempt on a new connection
// saves the lease. The hung attempt, cancelled by that answer, used to
// count as one given up, its wait as the patience of the next second
// attempt, which then went out past the loss: the second death lost the
// lease while Redis still held it.
func TestSilentDeathsInARowKeepTheLease(t *testing.T) {
	var cases []silentCase
	for _, ctxTimeout := range []bool{false, true} {
		for deaths := 2; deaths <= 3; deaths++ {
			cases = append(cases, silentCase{ttl: 3 * time.Second, iv: time.Second, first: 0.5, deaths: deaths, ctxTimeout: ctxTimeout})
		}
	}
	silentLeases(t, redistest.Start(t), cases)
}

// L1 at every renewal interval lease allows, from a tenth of the TTL to
// just under half of it: one silent death of the pooled connection, half
// way between two renewals, costs no lease. From about 0.4 TTL, the hung
// batch made the watchdog Behind (WaitingForAnswer) before its second
// attempt was due, and Behind stopped that attempt: the lease was lost.
func TestSilentDeathAtEveryIntervalKeepsTheLease(t *testing.T) {
	const ttl = 3 * time.Second
	var cases []silentCase
	for _, ctxTimeout := range []bool{false, true} {
		for iv := ttl / 10; iv < ttl/2; iv += ttl / 20 {
			cases = append(cases, silentCase{ttl: ttl, iv: iv, first: 0.5, deaths: 1, ctxTimeout: ctxTimeout})
		}
		for _, iv := range []time.Duration{ttl / 3, ttl/2 - time.Millisecond} { // the default, and the most lease allows
			cases = append(cases, silentCase{ttl: ttl, iv: iv, first: 0.5, deaths: 1, ctxTimeout: ctxTimeout})
		}
	}
	silentLeases(t, redistest.Start(t), cases)
}
