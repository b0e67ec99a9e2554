package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/watchdog"
)

// replyError is an error reply from the server (it implements redis.Error):
// the command was refused, not maybe applied.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// Deterministic tests of the manager's timing on a fake clock, against the
// in-memory backend. The integration tests run the same paths on Redis.

func fakeManager(t *testing.T, fake *backend.Fake, opts ...Option) *Manager {
	t.Helper()
	cfg, err := buildConfig(append([]Option{WithLogger(slog.New(slog.DiscardHandler))}, opts...))
	if err != nil {
		t.Fatal(err)
	}
	m := newManager(fake, cfg)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func TestSyncLeaseContextEndsAtLocalDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		m := fakeManager(t, fake, WithTTL(3*time.Second))
		start := time.Now()
		l, err := m.Acquire(context.Background(), "job")
		if err != nil {
			t.Fatal(err)
		}
		if want := start.Add(3*time.Second - 3*time.Second/100 - 2*time.Millisecond); !l.Deadline().Equal(want) {
			t.Fatalf("deadline %v, want %v", l.Deadline(), want)
		}
		time.Sleep(1500 * time.Millisecond) // renewed at 1s
		deadline := l.Deadline()
		fake.SetHang(true)
		<-l.Done()
		// A slack before the deadline, so that a late timer still cancels
		// by it.
		if want := deadline.Add(-watchdog.DefaultSlack(3 * time.Second)); !time.Now().Equal(want) {
			t.Fatalf("cancelled at %v, deadline %v: want the slack before it, %v", time.Now(), deadline, want)
		}
		if context.Cause(l.Context()) != ErrLost || l.Err() != ErrLost {
			t.Fatalf("cause %v", context.Cause(l.Context()))
		}
		// The server would still hold the key: the holder stopped first.
		if _, ttl, ok := fake.Holder("job"); !ok || ttl <= 0 {
			t.Fatalf("server key gone before the local deadline (ttl %v)", ttl)
		}
		fake.SetHang(false)
	})
}

func TestSyncWaiterWakesWhenHolderTTLRunsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		fake.Set("job", "dead holder", 700*time.Millisecond)
		m := fakeManager(t, fake, WithBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }))
		start := time.Now()
		l, err := m.Acquire(context.Background(), "job")
		if err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited > 702*time.Millisecond {
			t.Fatalf("waited %v for a holder with 700ms left", waited)
		}
		if fake.Calls("acquire") != 2 {
			t.Fatalf("%d attempts, want 2", fake.Calls("acquire"))
		}
		_ = l.Release(context.Background())
	})
}

func TestSyncUnknownAcquireIsAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		m := fakeManager(t, fake)
		fake.SetHang(true)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := m.Acquire(ctx, "job")
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("Acquire = %v", err)
		}
		fake.SetHang(false)
		synctest.Wait()
		if fake.Calls("abandon") != 1 {
			t.Fatalf("abandon calls %d, want 1", fake.Calls("abandon"))
		}
	})
}

func TestSyncServerErrorIsNotAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		m := fakeManager(t, fake)
		fake.SetFault(func(op string) error { return replyError("READONLY You can't write against a read only replica.") })
		if _, err := m.Acquire(context.Background(), "job"); err == nil || errors.Is(err, ErrNotAcquired) {
			t.Fatalf("Acquire = %v, want the server's error", err)
		}
		synctest.Wait()
		if fake.Calls("abandon") != 0 {
			t.Fatal("an attempt the server refused was abandoned")
		}
	})
}

func TestSyncDoReportsLossAndCancelsFn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		m := fakeManager(t, fake, WithTTL(3*time.Second))
		var fnCause error
		err := m.Do(context.Background(), "job", func(ctx context.Context) error {
			time.Sleep(500 * time.Millisecond)
			fake.Set("job", "intruder", time.Minute)
			<-ctx.Done()
			fnCause = context.Cause(ctx)
			return nil
		})
		if !errors.Is(err, ErrLost) || fnCause != ErrLost {
			t.Fatalf("Do = %v, fn saw %v", err, fnCause)
		}
		if tok, _, _ := fake.Holder("job"); tok != "intruder" {
			t.Fatal("Do released the intruder's lease")
		}
	})
}

// slowHandler is a log handler that takes its time, as one writing to a
// congested pipe does, and records what it was given.
type slowHandler struct {
	mu      *sync.Mutex
	records *[]slog.Record
}

func (h slowHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h slowHandler) Handle(_ context.Context, r slog.Record) error {
	time.Sleep(50 * time.Millisecond)
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.records = append(*h.records, r)
	return nil
}
func (h slowHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h slowHandler) WithGroup(string) slog.Handler      { return h }

// Many leases lost at one deadline are all cancelled at it, however slow
// the logger; the losses are logged after, as one summary line (a burst of
// losses is a line, not a line a lease).
func TestSyncSlowLoggerNeverDelaysCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		var mu sync.Mutex
		var records []slog.Record
		cfg, err := buildConfig([]Option{WithTTL(3 * time.Second), WithLogger(slog.New(slowHandler{&mu, &records}))})
		if err != nil {
			t.Fatal(err)
		}
		m := newManager(fake, cfg)
		const n = 50
		leases := make([]*Lease, n)
		for i := range leases {
			if leases[i], err = m.TryAcquire(context.Background(), fmt.Sprint("job-", i)); err != nil {
				t.Fatal(err)
			}
		}
		lossAt := leases[0].Deadline().Add(-watchdog.DefaultSlack(3 * time.Second))
		fake.SetHang(true) // no renewal is ever answered
		for _, l := range leases {
			<-l.Done()
			if now := time.Now(); !now.Equal(lossAt) {
				t.Fatalf("%s cancelled %v after it was due", l.Name(), now.Sub(lossAt))
			}
		}
		fake.SetHang(false)
		_ = m.Close()
		mu.Lock()
		defer mu.Unlock()
		if len(records) != 1 {
			t.Fatalf("%d loss records, want 1", len(records))
		}
		r := records[0]
		if r.Level != slog.LevelWarn || r.Message != "tenure: leases lost" {
			t.Fatalf("record %v %q", r.Level, r.Message)
		}
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		if attrs["count"] != fmt.Sprint(n) || attrs["expired"] != fmt.Sprint(n) || attrs["first"] == "" {
			t.Fatalf("attrs %v: want count and expired %d, and the first names", attrs, n)
		}
		// Every renewal was sent and went unanswered: an outage, not
		// overload (TestSyncOverloadLossesSayOverloaded).
		if attrs["while_overloaded"] != "0" {
			t.Fatalf("attrs %v: want while_overloaded 0", attrs)
		}
	})
}

// Held leases come first: while the watchdog is behind with their
// renewals (more are due than its workers can send, and one waits within
// a renewal interval of its loss), new leases are refused with
// ErrOverloaded instead of adding renewals; once it has caught up they are
// granted again.
func TestSyncOverloadRefusesNewLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		m := fakeManager(t, fake, WithTTL(3*time.Second))
		ctx := context.Background()
		// Four workers of 1000 renewals each: 5000 due at once leave 1000
		// waiting.
		for i := range 5000 {
			if _, err := m.TryAcquire(ctx, fmt.Sprint("held-", i)); err != nil {
				t.Fatal(err)
			}
		}
		fake.SetHang(true) // the server stops answering renewals
		time.Sleep(1500 * time.Millisecond)
		// Sent (and left unanswered, as everything now), not refused.
		ectx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		_, err := m.TryAcquire(ectx, "early")
		cancel()
		if errors.Is(err, ErrOverloaded) || fake.Calls("acquire") != 5001 {
			t.Fatalf("refused with every waiting renewal more than an interval from its loss: %v", err)
		}
		// Unanswered batches are given up every half interval and sent
		// again; between those moments 1000 wait, within 1s of their loss.
		time.Sleep(700 * time.Millisecond)
		nctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		_, err = m.TryAcquire(nctx, "new")
		cancel()
		if !errors.Is(err, ErrOverloaded) || !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("TryAcquire while behind: %v, want ErrOverloaded and ErrNotAcquired", err)
		}
		if !strings.Contains(err.Error(), "waited for") {
			t.Fatalf("TryAcquire while behind: %q does not say which renewal waited", err)
		}
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err = m.Acquire(wctx, "new")
		cancel()
		if !errors.Is(err, ErrOverloaded) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire while behind: %v, want ErrOverloaded and the context's error", err)
		}
		if _, _, ok := fake.Holder("new"); ok {
			t.Fatal("a refused acquire reached the server")
		}
		fake.SetHang(false)
		time.Sleep(3 * time.Second) // every held lease is lost by now; nothing waits
		if _, err := m.TryAcquire(ctx, "new"); err != nil {
			t.Fatalf("after catching up: %v", err)
		}
	})
}

// recorder keeps the records it is given.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *recorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
	return nil
}
func (h *recorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recorder) WithGroup(string) slog.Handler      { return h }

// A lease lost because its renewal was never sent (every worker busy with
// earlier batches) is a loss to overload, told apart from one whose
// renewal went unanswered (an outage): four workers of 1,000 can send at
// most 4,000 of 5,000 renewals that the server never answers, and the
// rest wait for a worker until their loss. The summary line counts the
// former as while_overloaded.
func TestSyncOverloadLossesSayOverloaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		m := fakeManager(t, fake, WithTTL(3*time.Second))
		leases := make([]*Lease, 5000)
		var err error
		for i := range leases {
			if leases[i], err = m.TryAcquire(context.Background(), fmt.Sprint("held-", i)); err != nil {
				t.Fatal(err)
			}
		}
		fake.SetHang(true)
		unsent := 0
		for _, l := range leases {
			<-l.Done()
			l.mu.Lock()
			if errors.Is(l.reason, watchdog.ErrBehind) {
				unsent++
			}
			l.mu.Unlock()
		}
		fake.SetHang(false)
		if unsent < 1000 || unsent == len(leases) {
			t.Fatalf("%d of %d lost unsent; want at least the 1,000 no worker could send, and not those sent", unsent, len(leases))
		}
		rec := &recorder{}
		m.cfg.logger = slog.New(rec)
		m.logLosses([]lossReport{{name: "a", reason: watchdog.ErrExpired, behind: true}, {name: "b", reason: watchdog.ErrExpired}})
		var attr string
		rec.records[0].Attrs(func(a slog.Attr) bool {
			if a.Key == "while_overloaded" {
				attr = a.Value.String()
			}
			return true
		})
		if attr != "1" {
			t.Fatalf("while_overloaded=%q for one loss to overload and one to an outage", attr)
		}
	})
}

// A fair waiter whose caller gives up between a wake-up and its next
// attempt leaves the queue: its request never went out, so no abandon
// follows to take it out, and the waiters behind it would wait until the
// queue forgot it. (The interleaving rwlock's TestWriterThatGivesUpWakesReaders
// met by chance: a timer and the caller's cancel at one instant.)
func TestSyncWaiterGivingUpBeforeItsAttemptLeavesTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := backend.NewFake()
		m := fakeManager(t, fake, WithFair(true))
		bg := context.Background()
		holder, err := m.Acquire(bg, "job")
		if err != nil {
			t.Fatal(err)
		}
		a, err := m.acquireConfig("job", nil)
		if err != nil {
			t.Fatal(err)
		}
		var attempts int
		w := m.newWait(backend.Request{Name: "job", TTL: a.ttl}, a, &attempts)
		ctx, giveUp := context.WithCancel(bg)
		if l, res, err := w.attempt(ctx); err != nil || l != nil || res.Arrival == 0 {
			t.Fatalf("first attempt: lease %v, %+v, %v; want a place in the queue", l, res, err)
		}
		giveUp()
		if _, _, err := w.attempt(ctx); !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Fatalf("attempt after giving up: %v", err)
		}
		w.end()
		synctest.Wait()
		if err := holder.Release(bg); err != nil {
			t.Fatal(err)
		}
		// Fair, the next caller gets in only once nobody is queued ahead.
		next, err := m.TryAcquire(bg, "job")
		if err != nil {
			t.Fatalf("the name, free, after the only waiter gave up: %v (left %d, abandoned %d)",
				err, fake.Calls("leave"), fake.Calls("abandon"))
		}
		_ = next.Release(bg)
	})
}

// A refusal for demand over capacity says the figures it weighed, so that
// a refusal can be told from a capacity measured wrong; the other facts
// say only themselves. The error is the same either way for errors.Is.
func TestOverloadedSaysTheLoad(t *testing.T) {
	load := watchdog.Load{Demand: 1600, PerWorker: 500, Workers: 4}
	for _, why := range []error{nil, errBackOffStop} {
		err := overloaded("job", watchdog.DemandOverCapacity, load, why)
		want := "1600 renewals/s called for, capacity 2000/s (4 workers × 500/s, from batches without an acquisition storm)"
		if !strings.Contains(err.Error(), want) || !errors.Is(err, ErrOverloaded) || !errors.Is(err, ErrNotAcquired) {
			t.Errorf("refusal (why %v): %v; want it to say %q and match ErrOverloaded", why, err, want)
		}
		err = overloaded("job", watchdog.WaitingForAnswer, load, why)
		if strings.Contains(err.Error(), "renewals/s") || !strings.Contains(err.Error(), watchdog.WaitingForAnswer.String()) {
			t.Errorf("refusal for a renewal waiting for its answer (why %v): %v", why, err)
		}
	}
	load.ShortOfCPU = true
	if err := overloaded("job", watchdog.DemandOverCapacity, load, nil); !strings.Contains(err.Error(), "from every batch, the process being short of CPU") {
		t.Errorf("refusal short of CPU: %v", err)
	}
}
