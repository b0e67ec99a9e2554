package redisson_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/redisson"
)

// replyHook is a go-redis hook that makes the replies of the commands it
// picks late or lost, after the server ran them: the first held of them
// wait for gate to close, and the first dropped come back as errDropped,
// a transport error (the outcome unknown). Each reply picked is reported
// on ran with the time its command was sent.
type replyHook struct {
	pick    func(redis.Cmder) bool
	held    atomic.Int32
	dropped atomic.Int32
	gate    chan struct{}
	ran     chan time.Time
}

var errDropped = errors.New("test: the reply was lost")

func newReplyHook(pick func(redis.Cmder) bool) *replyHook {
	return &replyHook{pick: pick, gate: make(chan struct{}), ran: make(chan time.Time, 64)}
}

func (h *replyHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *replyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *replyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		sent := time.Now()
		if err := next(ctx, cmd); err != nil || !h.pick(cmd) {
			return err
		}
		select {
		case h.ran <- sent:
		default:
		}
		if h.held.Add(-1) >= 0 {
			<-h.gate
		}
		if h.dropped.Add(-1) >= 0 {
			cmd.SetErr(errDropped)
			return errDropped
		}
		return nil
	}
}

// next waits for the next reply picked and returns when its command was
// sent.
func (h *replyHook) next(t *testing.T, ctx context.Context) time.Time {
	t.Helper()
	select {
	case sent := <-h.ran:
		return sent
	case <-ctx.Done():
		t.Fatal("the command was not sent")
		return time.Time{}
	}
}

// openAfter opens the gate d after the next reply's command was sent (at
// once if ctx ends first), from a goroutine of its own.
func (h *replyHook) openAfter(ctx context.Context, d time.Duration) {
	go func() {
		select {
		case sent := <-h.ran:
			time.Sleep(time.Until(sent.Add(d)))
		case <-ctx.Done():
		}
		close(h.gate)
	}()
}

// hookedClient returns a go-redis client of the test server with h.
func hookedClient(t *testing.T, h *replyHook) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	c.AddHook(h)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func hasArg(cmd redis.Cmder, arg string) bool {
	for _, a := range cmd.Args() {
		if argString(a) == arg {
			return true
		}
	}
	return false
}

// argString is a command argument as a string: the scripts pass their
// keys as *string (backend.Script), which go-redis writes as the string.
func argString(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case *string:
		return *v
	}
	return ""
}

// lockReplies picks the replies of the lock scripts of key: three
// integers, each kind's.
func lockReplies(key string) func(redis.Cmder) bool {
	return func(cmd redis.Cmder) bool {
		c, ok := cmd.(*redis.Cmd)
		if !ok || !hasArg(cmd, key) {
			return false
		}
		v, err := c.Int64Slice()
		return err == nil && len(v) == 3
	}
}

// acquireReplies picks the replies of sem_acquire.lua on the semaphore
// whose timeouts are at timeouts: two integers.
func acquireReplies(timeouts string) func(redis.Cmder) bool {
	return func(cmd redis.Cmder) bool {
		c, ok := cmd.(*redis.Cmd)
		if !ok || !hasArg(cmd, timeouts) {
			return false
		}
		v, err := c.Int64Slice()
		return err == nil && len(v) == 2
	}
}

// updateReplies picks the replies of sem_update.lua on the semaphore whose
// timeouts are at timeouts: 3 keys and 4 arguments after the script.
func updateReplies(timeouts string) func(redis.Cmder) bool {
	return func(cmd redis.Cmder) bool {
		return len(cmd.Args()) == 10 && hasArg(cmd, timeouts) && argString(cmd.Args()[4]) == timeouts
	}
}

func uniqueName(t *testing.T) string {
	return strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()) + "-" + uuid()[:8]
}

type lockResult struct {
	h   *redisson.Hold
	err error
}

// TestLateLockReplyNotHandedOver: a lock whose acquire reply comes after
// its local deadline (the key already expired, another client holding the
// lock) is not handed over: Lock gives it back and waits, and returns a
// Hold only once the other client unlocked (S1).
func TestLateLockReplyNotHandedOver(t *testing.T) {
	ctx := bounded(t, time.Minute)
	name := uniqueName(t)
	hook := newReplyHook(lockReplies(name))
	hook.held.Store(1)
	a := newClient(t, hookedClient(t, hook), redisson.WithWatchdogTimeout(time.Second))
	plain := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = plain.Close() })
	b := newClient(t, plain)

	got := make(chan lockResult, 1)
	go func() {
		h, err := a.GetLock(name).Lock(ctx)
		got <- lockResult{h, err}
	}()
	hook.next(t, ctx)
	for plain.Exists(ctx, name).Val() != 0 { // A's entry, not renewed, expires
		if ctx.Err() != nil {
			t.Fatal("A's entry did not expire")
		}
		time.Sleep(10 * time.Millisecond)
	}
	hb, err := b.GetLock(name).TryLock(ctx)
	if err != nil {
		t.Fatalf("B's TryLock on an expired lock: %v", err)
	}
	close(hook.gate) // A's reply comes now, far past its local deadline

	select {
	case r := <-got:
		if r.err == nil {
			t.Fatalf("A's Lock handed over a Hold (live: %v, deadline passed %v ago) while B held the lock",
				r.h.Err() == nil, time.Since(r.h.Deadline()))
		}
		t.Fatalf("A's Lock: %v, want it to wait for B", r.err)
	case <-hook.ran: // A's next attempt found B holding
	}
	if err := hb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("A's Lock after B unlocked: %v", r.err)
	}
	if err := r.h.Err(); err != nil || !time.Now().Before(r.h.Deadline()) {
		t.Fatalf("A's Hold: err %v, deadline %v", err, r.h.Deadline())
	}
	if err := r.h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLateLockReplyGivenBack: a TryLock whose reply comes after its local
// deadline, while the server still keeps the entry, returns
// lease.ErrNotAcquired and takes the entry back, for every kind of lock;
// a re-entry as slow, into a hold the watchdog kept in time, is handed
// over.
func TestLateLockReplyGivenBack(t *testing.T) {
	kinds := []struct {
		name string
		lock func(*redisson.Client, string) *redisson.Lock
	}{
		{"RLock", (*redisson.Client).GetLock},
		{"RFencedLock", (*redisson.Client).GetFencedLock},
		{"RFairLock", (*redisson.Client).GetFairLock},
		{"ReadLock", func(c *redisson.Client, name string) *redisson.Lock { return c.GetReadWriteLock(name).ReadLock() }},
		{"WriteLock", func(c *redisson.Client, name string) *redisson.Lock { return c.GetReadWriteLock(name).WriteLock() }},
	}
	for _, k := range kinds {
		for _, reentry := range []bool{false, true} {
			label := k.name
			if reentry {
				label += "/reentry"
			}
			t.Run(label, func(t *testing.T) {
				t.Parallel()
				lateTryLock(t, k.lock, reentry)
			})
		}
	}
}

// lateTryLock is a TryLock (a re-entry, if reentry) on a lock of the kind
// that lock makes, answered half a TTL after the local deadline.
func lateTryLock(t *testing.T, lock func(*redisson.Client, string) *redisson.Lock, reentry bool) {
	const ttl = 4 * time.Second // the server keeps an entry 2s past its local deadline
	ctx := bounded(t, time.Minute)
	name := uniqueName(t)
	hook := newReplyHook(lockReplies(name))
	c := hookedClient(t, hook)
	cl := newClient(t, c, redisson.WithWatchdogTimeout(ttl), redisson.WithDrift(0.5, 0))
	l := lock(cl, name)
	octx := redisson.WithOwner(ctx, redisson.Owner{ThreadID: 1})
	var first *redisson.Hold
	if reentry {
		h, err := l.Lock(octx)
		if err != nil {
			t.Fatal(err)
		}
		first = h
		hook.next(t, ctx)
	}
	hook.held.Store(1)
	hook.openAfter(ctx, ttl/2+50*time.Millisecond)
	h, err := l.TryLock(octx)
	if reentry {
		// A re-entry counts on its hold's deadline, which the watchdog
		// kept in time meanwhile: a slow reply into a live hold is handed
		// over, and counted once.
		if err != nil {
			t.Fatalf("a late re-entry into a live hold: %v", err)
		}
		if got := c.HGet(ctx, name, first.Field()).Val(); got != "2" {
			t.Fatalf("the owner's count is %q after a late re-entry, want 2", got)
		}
		for _, x := range []*redisson.Hold{h, first} {
			if err := x.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := c.Exists(ctx, name).Val(); n != 0 {
			t.Fatalf("the lock is still there after both entries were unlocked: %v", c.HGetAll(ctx, name).Val())
		}
		return
	}
	if err == nil {
		t.Fatalf("TryLock handed over an entry answered past ttl − drift (hold deadline %v from now)", time.Until(h.Deadline()))
	}
	if !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("TryLock: %v, want ErrNotAcquired", err)
	}
	if n := c.Exists(ctx, name).Val(); n != 0 {
		t.Fatalf("the late entry was not taken back: %v", c.HGetAll(ctx, name).Val())
	}
}

// TestLatePermitReplyNotHandedOver: a permit whose acquire reply comes
// after its local deadline (another client having reclaimed it) is not
// handed over: Acquire releases it and waits, and returns a Permit only
// once the other client released its own (S1).
func TestLatePermitReplyNotHandedOver(t *testing.T) {
	ctx := bounded(t, time.Minute)
	name := uniqueName(t)
	plain := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = plain.Close() })
	b := newClient(t, plain)
	sb := b.GetPermitExpirableSemaphore(name)
	if err := sb.SetPermits(ctx, 1); err != nil {
		t.Fatal(err)
	}
	hook := newReplyHook(acquireReplies(sb.TimeoutsKey()))
	hook.held.Store(1)
	a := newClient(t, hookedClient(t, hook))

	type result struct {
		p   *redisson.Permit
		err error
	}
	got := make(chan result, 1)
	go func() {
		p, err := a.GetPermitExpirableSemaphore(name).Acquire(ctx, time.Second)
		got <- result{p, err}
	}()
	hook.next(t, ctx)
	pb, err := sb.Acquire(ctx, time.Minute) // reclaims A's once expired
	if err != nil {
		t.Fatal(err)
	}
	close(hook.gate)

	select {
	case r := <-got:
		if r.err == nil {
			d, _ := r.p.Deadline()
			t.Fatalf("A's Acquire handed over a Permit (live: %v, deadline passed %v ago) while B held it",
				r.p.Err() == nil, time.Since(d))
		}
		t.Fatalf("A's Acquire: %v, want it to wait for B", r.err)
	case <-hook.ran: // A's next attempt found no permit free
	}
	if err := pb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("A's Acquire after B released: %v", r.err)
	}
	if d, _ := r.p.Deadline(); r.p.Err() != nil || !time.Now().Before(d) {
		t.Fatalf("A's Permit: err %v, deadline %v", r.p.Err(), d)
	}
	if err := r.p.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLatePermitReplyGivenBack: a TryAcquire whose reply comes after its
// local deadline, before the permit's expiry, returns
// lease.ErrNotAcquired and releases the permit.
func TestLatePermitReplyGivenBack(t *testing.T) {
	const leaseTime = 4 * time.Second
	ctx := bounded(t, time.Minute)
	name := uniqueName(t)
	admin := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = admin.Close() })
	s0 := newClient(t, admin).GetPermitExpirableSemaphore(name)
	if err := s0.SetPermits(ctx, 1); err != nil {
		t.Fatal(err)
	}
	hook := newReplyHook(acquireReplies(s0.TimeoutsKey()))
	hook.held.Store(1)
	cl := newClient(t, hookedClient(t, hook), redisson.WithDrift(0.5, 0))
	hook.openAfter(ctx, leaseTime/2+50*time.Millisecond)
	p, err := cl.GetPermitExpirableSemaphore(name).TryAcquire(ctx, leaseTime)
	if err == nil {
		d, _ := p.Deadline()
		t.Fatalf("TryAcquire handed over a Permit answered past its deadline (%v ago)", time.Since(d))
	}
	if !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("TryAcquire: %v, want ErrNotAcquired", err)
	}
	// Read raw: AvailablePermits would reclaim an expired permit.
	if n, free := admin.ZCard(ctx, s0.TimeoutsKey()).Val(), admin.Get(ctx, name).Val(); n != 0 || free != "1" {
		t.Fatalf("the late permit was not released: %d taken, %q free", n, free)
	}
}

// TestShorterLeaseMovesDeadlineFirst: UpdateLeaseTime to a shorter lease
// moves the local deadline before its request goes, so that a reply late
// or lost does not keep the Permit's context running past the new expiry,
// when another client may reclaim the permit.
func TestShorterLeaseMovesDeadlineFirst(t *testing.T) {
	for _, lost := range []bool{false, true} {
		label := "late"
		if lost {
			label = "lost"
		}
		t.Run(label, func(t *testing.T) {
			t.Parallel()
			const shorter = 4 * time.Second // the local deadline 2s before it
			ctx := bounded(t, time.Minute)
			name := uniqueName(t)
			plain := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
			t.Cleanup(func() { _ = plain.Close() })
			sb := newClient(t, plain).GetPermitExpirableSemaphore(name)
			if err := sb.SetPermits(ctx, 1); err != nil {
				t.Fatal(err)
			}
			hook := newReplyHook(updateReplies(sb.TimeoutsKey()))
			a := newClient(t, hookedClient(t, hook), redisson.WithDrift(0.5, 0))
			p, err := a.GetPermitExpirableSemaphore(name).Acquire(ctx, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if lost {
				hook.dropped.Store(1)
			} else {
				hook.held.Store(1)
			}
			updated := make(chan error, 1)
			go func() { updated <- p.UpdateLeaseTime(ctx, shorter) }()
			sent := hook.next(t, ctx)
			if d, _ := p.Deadline(); !d.Before(sent.Add(shorter)) {
				t.Fatalf("deadline %v after the shorter lease's expiry %v, its update applied", d, sent.Add(shorter))
			}
			pb, err := sb.Acquire(ctx, time.Minute) // reclaims p once expired
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.Done():
			default:
				t.Fatal("B acquired while A's Permit was live")
			}
			if !errors.Is(p.Err(), lease.ErrLost) {
				t.Fatalf("A's Permit ended with %v, want ErrLost", p.Err())
			}
			close(hook.gate)
			if err := <-updated; err == nil {
				t.Fatal("UpdateLeaseTime succeeded for a Permit that ended before its reply")
			}
			if err := pb.Err(); err != nil {
				t.Fatalf("B's permit: %v", err)
			}
			_ = pb.Release(ctx)
		})
	}
}

// TestPermitUpdatedAfterItsEndIsGivenBack: a permit that the server
// updated (here to no lease time: never to expire) after its local end,
// or whose update went unanswered, is given back, by UpdateLeaseTime, by
// its timer or by Close at the latest, never forgotten.
func TestPermitUpdatedAfterItsEndIsGivenBack(t *testing.T) {
	for _, how := range []string{"after-end", "at-deadline", "lost"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ctx := bounded(t, time.Minute)
			name := uniqueName(t)
			plain := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
			t.Cleanup(func() { _ = plain.Close() })
			sb := newClient(t, plain).GetPermitExpirableSemaphore(name)
			if err := sb.SetPermits(ctx, 1); err != nil {
				t.Fatal(err)
			}
			hook := newReplyHook(updateReplies(sb.TimeoutsKey()))
			a := newClient(t, hookedClient(t, hook))
			p, err := a.GetPermitExpirableSemaphore(name).Acquire(ctx, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if how == "lost" {
				hook.dropped.Store(1)
			} else {
				hook.held.Store(1)
			}
			updated := make(chan error, 1)
			go func() { updated <- p.UpdateLeaseTime(ctx, 0) }()
			hook.next(t, ctx)
			switch how {
			case "after-end":
				<-p.Done()
			case "at-deadline": // the reply and the timer race
				d, _ := p.Deadline()
				time.Sleep(time.Until(d))
			}
			close(hook.gate)
			err = <-updated
			if how != "lost" && !errors.Is(err, lease.ErrNotHeld) {
				t.Fatalf("UpdateLeaseTime answered after the local deadline: %v, want ErrNotHeld", err)
			}
			<-p.Done()
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if n := plain.ZCard(ctx, sb.TimeoutsKey()).Val(); n != 0 {
				t.Fatalf("the permit was forgotten, not given back: %v", plain.ZRangeWithScores(ctx, sb.TimeoutsKey(), 0, -1).Val())
			}
		})
	}
}
