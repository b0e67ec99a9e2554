package backend_test

import (
	"context"
	"errors"
	"time"

	"github.com/tenure-go/tenure/internal/backend"
)

// The contract of semaphores' permits, the fair queue's other paths,
// Available and Downgrade: what permit.lua, the 'z' kinds of renew.lua,
// release.lua and abandon.lua, leave.lua, available.lua and
// downgrade.lua answer, and the Fake answers alike (docs/design.md
// section 11).

// semaphoreBackend is what a backend offers packages semaphore and rwlock
// beyond Backend.
type semaphoreBackend interface {
	Available(ctx context.Context, name string, n int) (free, limit int, err error)
	Downgrade(ctx context.Context, w backend.Item, req backend.Request) (int64, error)
}

func (c contract) sem() semaphoreBackend {
	c.t.Helper()
	s, ok := c.be.(semaphoreBackend)
	if !ok {
		c.t.Fatalf("%T has no Available and Downgrade", c.be)
	}
	return s
}

// available fails the test unless name has want of n permits free,
// counted of limit.
func (c contract) available(name string, n, want, limit int) {
	c.t.Helper()
	free, l, err := c.sem().Available(c.ctx, name, n)
	if err != nil || free != want || l != limit {
		c.t.Fatalf("Available(%q, %d) = %d of %d, %v; want %d of %d", name, n, free, l, err, want, limit)
	}
}

func permit(name, token string, n int) backend.Request {
	return backend.Request{Name: name, Token: token, TTL: time.Minute, Limit: n}
}

// permitK is a request for k of n permits at once.
func permitK(name, token string, n, k int) backend.Request {
	r := permit(name, token, n)
	r.Permits = k
	return r
}

// contractPermits: at most n permits; a resend gets its first answer and
// no second permit; fences grow; renewal never shortens a permit and says
// "gone" for one never held; release frees one and is remembered; an
// abandoned request's late copy is refused; the last permit's going frees
// the name for a lease.
func contractPermits(c contract) {
	a := c.mustAcquire(permit("s", "t1", 2))
	if again := c.mustAcquire(permit("s", "t1", 2)); again.Fence != a.Fence {
		c.t.Fatalf("resend: %+v, first %+v", again, a)
	}
	c.available("s", 2, 1, 2)
	if b := c.mustAcquire(permit("s", "t2", 2)); b.Fence <= a.Fence {
		c.t.Fatalf("second permit's fence %d after %d", b.Fence, a.Fence)
	}
	full := c.acquire(permit("s", "t3", 2))
	if full.Acquired || full.Retired || full.HolderTTL <= 59*time.Second || full.HolderTTL > time.Minute || full.Free != 0 {
		c.t.Fatalf("a third of two: %+v, want to wait the earliest permit's TTL, none free", full)
	}
	t1 := permit("s", "t1", 2).Item()
	short := t1
	short.TTL = time.Second
	errs := c.renew(short, backend.Item{Name: "s", Token: "zz", TTL: time.Minute, Permit: true})
	if errs[0] != nil || !errors.Is(errs[1], backend.ErrGone) {
		c.t.Fatalf("renew as holder with 1s, and of a permit never held: %v", errs)
	}
	if w := c.acquire(permit("s", "t3", 2)).HolderTTL; w <= 59*time.Second {
		c.t.Fatalf("a renewal with 1s cut the earliest permit to %v", w)
	}
	for range 2 {
		if err := c.release(t1)[0]; err != nil {
			c.t.Fatalf("release (and its resent copy): %v", err)
		}
	}
	c.available("s", 2, 1, 2)
	if err := c.release(permit("s", "t9", 2).Item())[0]; !errors.Is(err, backend.ErrNotHeld) {
		c.t.Fatalf("release of a permit never held: %v", err)
	}
	c.mustAcquire(permit("s", "t4", 2))
	if err := c.be.Abandon(c.ctx, permit("s", "t4", 2)); err != nil {
		c.t.Fatal(err)
	}
	if late := c.acquire(permit("s", "t4", 2)); late.Acquired || !late.Retired {
		c.t.Fatalf("a copy after Abandon: %+v, want Retired", late)
	}
	c.available("s", 2, 1, 2)
	if err := c.release(permit("s", "t2", 2).Item())[0]; err != nil {
		c.t.Fatal(err)
	}
	c.mustAcquire(lease("s", "lease", time.Minute)) // the set went with its last permit
}

// contractPermitsExpire: a permit past its TTL is free whoever else still
// holds one, answers "gone" to its renewal and "not held" to its release;
// a set whose permits have all expired is no holder.
func contractPermitsExpire(c contract) {
	short := permit("e", "short", 2)
	short.TTL = 100 * time.Millisecond
	c.mustAcquire(short)
	c.mustAcquire(permit("e", "long", 2))
	late := permit("f", "late", 1)
	late.TTL = 100 * time.Millisecond
	c.mustAcquire(late)
	time.Sleep(200 * time.Millisecond)
	c.available("e", 2, 1, 2)
	if err := c.renew(short.Item())[0]; !errors.Is(err, backend.ErrGone) {
		c.t.Fatalf("renewing an expired permit: %v, want ErrGone", err)
	}
	c.mustAcquire(permit("e", "next", 2))
	if err := c.release(late.Item())[0]; !errors.Is(err, backend.ErrNotHeld) {
		c.t.Fatalf("releasing an expired permit: %v, want ErrNotHeld", err)
	}
	c.mustAcquire(lease("f", "lease", time.Minute))
}

// contractPermitsKind: one name is one lock: a lease or a reentrant lock
// and permits exclude each other, and a permit's renewal on a name a lease
// took over says "not held", not "gone".
func contractPermitsKind(c contract) {
	c.mustAcquire(lease("l", "lease", time.Minute))
	if a := c.acquire(permit("l", "p", 5)); a.Acquired || a.HolderTTL <= 59*time.Second || a.Free != -1 {
		c.t.Fatalf("a permit beside a lease: %+v, want the lease's TTL, Free -1", a)
	}
	err := c.renew(permit("l", "p", 5).Item())[0]
	if !errors.Is(err, backend.ErrNotHeld) || errors.Is(err, backend.ErrGone) {
		c.t.Fatalf("renewing a permit of a leased name: %v, want ErrNotHeld, not ErrGone", err)
	}
	c.mustAcquire(permit("p", "p", 5))
	if a := c.acquire(lease("p", "lease", time.Minute)); a.Acquired || a.HolderTTL <= 59*time.Second || !a.HeldByPermits {
		c.t.Fatalf("a lease beside permits: %+v, want HeldByPermits", a)
	}
	if a := c.acquire(backend.Request{Name: "p", Token: "r", TTL: time.Minute, Owner: "o"}); a.Acquired || !a.HeldByPermits {
		c.t.Fatalf("a reentrant lock beside permits: %+v", a)
	}
	if a := c.acquire(lease("l", "lease2", time.Minute)); a.HeldByPermits {
		c.t.Fatalf("a lease beside a lease: %+v, said held by permits", a)
	}
	if err := c.release(lease("p", "p", time.Minute).Item())[0]; !errors.Is(err, backend.ErrNotHeld) {
		c.t.Fatalf("a lease's release of a permit's token: %v", err)
	}
	if !c.held(permit("p", "p", 5).Item()) {
		c.t.Fatal("the permit went")
	}
}

// contractPermitLimit: the first grant's n stands while permits are held;
// another n is refused at once, joining no queue, unless it resizes; the n
// goes with the last permit.
func contractPermitLimit(c contract) {
	c.mustAcquire(permit("s", "t1", 2))
	for _, fair := range []time.Duration{0, time.Minute} {
		r := permit("s", "t2", 3)
		r.Queue = fair
		if a := c.acquire(r); a.Acquired || a.HeldLimit != 2 || a.Arrival != 0 {
			c.t.Fatalf("n=3 beside n=2 (queue %v): %+v, want HeldLimit 2", fair, a)
		}
	}
	// The refused fair request is in no queue: a barging one goes at once.
	c.mustAcquire(permit("s", "barging", 2))
	if err := c.release(permit("s", "barging", 2).Item())[0]; err != nil {
		c.t.Fatal(err)
	}
	resize := permit("s", "t3", 1)
	resize.Resize = true
	if a := c.acquire(resize); a.Acquired || a.HeldLimit != 0 {
		c.t.Fatalf("resize to 1 with 1 held: %+v, want refused for want of a permit", a)
	}
	c.available("s", 2, 0, 1)
	if a := c.acquire(permit("s", "t4", 2)); a.HeldLimit != 1 {
		c.t.Fatalf("n=2 after resizing to 1: %+v", a)
	}
	if err := c.release(permit("s", "t1", 2).Item())[0]; err != nil {
		c.t.Fatal(err)
	}
	c.mustAcquire(permit("s", "t5", 5))
	c.available("s", 9, 4, 5)
}

// contractPermitsK: k permits at once, all or none, as one hold that
// renews, releases and is abandoned whole.
func contractPermitsK(c contract) {
	var last int64
	for _, tok := range []string{"s1", "s2", "s3"} {
		last = c.mustAcquire(permit("k", tok, 5)).Fence
	}
	if a := c.acquire(permitK("k", "many", 5, 3)); a.Acquired || a.Free != 2 {
		c.t.Fatalf("3 with 2 free: %+v, want refused, Free 2", a)
	}
	c.available("k", 5, 2, 5)
	if err := c.release(permit("k", "s1", 5).Item())[0]; err != nil {
		c.t.Fatal(err)
	}
	many := permitK("k", "many", 5, 3)
	if a := c.mustAcquire(many); a.Fence <= last {
		c.t.Fatalf("fence %d after %d", a.Fence, last)
	}
	c.available("k", 5, 0, 5)
	if err := c.renew(many.Item())[0]; err != nil {
		c.t.Fatalf("renewing 3 permits: %v", err)
	}
	if err := c.release(many.Item())[0]; err != nil {
		c.t.Fatal(err)
	}
	c.available("k", 5, 3, 5)
	ab := permitK("k", "ab", 5, 2)
	c.mustAcquire(ab)
	c.available("k", 5, 1, 5)
	if err := c.be.Abandon(c.ctx, ab); err != nil {
		c.t.Fatal(err)
	}
	c.available("k", 5, 3, 5)
}

// contractFairPermits: fair permit requests are granted in the order they
// first asked, a request of k keeping k places so that those behind leave
// it room; barging ones wait while anyone queues; a waiter that leaves
// takes its k places with it.
func contractFairPermits(c contract) {
	fair := func(tok string, k int) backend.Request {
		r := permitK("q", tok, 2, k)
		r.Queue = 5 * time.Second
		return r
	}
	c.mustAcquire(permitK("q", "h", 2, 2))
	w1, w2 := fair("w1", 2), fair("w2", 1)
	a1, a2 := c.acquire(w1), c.acquire(w2)
	if a1.Acquired || a2.Acquired || a1.Arrival <= 0 || a2.Arrival <= a1.Arrival {
		c.t.Fatalf("queued: %+v %+v, want arrivals in order", a1, a2)
	}
	if err := c.release(permitK("q", "h", 2, 2).Item())[0]; err != nil {
		c.t.Fatal(err)
	}
	if a := c.acquire(w2); a.Acquired || a.HolderTTL > 5*time.Second || a.Free != 2 {
		c.t.Fatalf("w2 behind w1's 2 places with 2 free: %+v, want to wait at most w1's patience, Free 2", a)
	}
	if a := c.acquire(permit("q", "barging", 2)); a.Acquired {
		c.t.Fatalf("a barging permit past the queue: %+v", a)
	}
	c.mustAcquire(w1)
	if err := c.release(w1.Item())[0]; err != nil {
		c.t.Fatal(err)
	}
	c.mustAcquire(w2)
	w3 := fair("w3", 2)
	if a := c.acquire(w3); a.Acquired || a.Arrival <= a2.Arrival {
		c.t.Fatalf("2 with 1 free: %+v", a)
	}
	if a := c.acquire(permit("q", "barging", 2)); a.Acquired {
		c.t.Fatalf("a barging permit past w3: %+v", a)
	}
	if err := c.be.Leave(c.ctx, w3); err != nil {
		c.t.Fatal(err)
	}
	c.mustAcquire(permit("q", "barging", 2))
}

// contractFairAbandon: an abandoned fair request leaves the queue, so the
// one behind it need not wait for it to be forgotten.
func contractFairAbandon(c contract) {
	fair := func(tok string) backend.Request {
		return backend.Request{Name: "a", Token: tok, TTL: time.Minute, Queue: time.Minute}
	}
	holder := lease("a", "h", time.Minute)
	c.mustAcquire(holder)
	w1, w2 := fair("w1"), fair("w2")
	c.acquire(w1)
	c.acquire(w2)
	if err := c.release(holder.Item())[0]; err != nil {
		c.t.Fatal(err)
	}
	if err := c.be.Abandon(c.ctx, w1); err != nil {
		c.t.Fatal(err)
	}
	c.mustAcquire(w2)
}

// contractAvailable: the free permits of a free name, of one held by a
// lease or a reentrant lock (none), and of permits (the stored n counts).
func contractAvailable(c contract) {
	c.available("free", 3, 3, 3)
	c.mustAcquire(lease("l", "t", time.Minute))
	c.available("l", 3, 0, 3)
	c.mustAcquire(backend.Request{Name: "r", Token: "t", TTL: time.Minute, Owner: "o"})
	c.available("r", 3, 0, 3)
	c.mustAcquire(permit("s", "t", 3))
	c.available("s", 5, 2, 3)
}

// contractDowngrade: a writer's lease becomes one read permit in one step,
// with a larger fence; a resend gets the first answer; other writers stay
// out and readers come in; a downgrade by a token that does not hold the
// name, or of an abandoned request, touches nothing.
func contractDowngrade(c contract) {
	const readers = 1 << 30
	w := lease("d", "w", time.Minute)
	first := c.mustAcquire(w)
	r := permit("d", "r", readers)
	f, err := c.sem().Downgrade(c.ctx, w.Item(), r)
	if err != nil || f <= first.Fence {
		c.t.Fatalf("Downgrade: fence %d, %v; the writer's %d", f, err, first.Fence)
	}
	if again, err := c.sem().Downgrade(c.ctx, w.Item(), r); err != nil || again != f {
		c.t.Fatalf("resent Downgrade: %d %v, want %d", again, err, f)
	}
	if c.held(w.Item()) || !c.held(r.Item()) {
		c.t.Fatal("after Downgrade the writer holds, or the reader does not")
	}
	c.mustAcquire(permit("d", "r2", readers))
	if a := c.acquire(lease("d", "w2", time.Minute)); a.Acquired {
		c.t.Fatalf("a writer beside the downgraded reader: %+v", a)
	}
	if _, err := c.sem().Downgrade(c.ctx, lease("e", "nobody", time.Minute).Item(), permit("e", "r", readers)); !errors.Is(err, backend.ErrNotHeld) {
		c.t.Fatalf("Downgrade of a free name: %v", err)
	}
	w3 := lease("g", "w3", time.Minute)
	c.mustAcquire(w3)
	gone := permit("g", "r3", readers)
	if err := c.be.Abandon(c.ctx, gone); err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.sem().Downgrade(c.ctx, w3.Item(), gone); !errors.Is(err, backend.ErrNotHeld) || !c.held(w3.Item()) {
		c.t.Fatalf("Downgrade to an abandoned request: %v, want ErrNotHeld and the writer untouched", err)
	}
}
