package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// A holder identity rides in the stored value: tools read it with one GET,
// and renewal, release and exclusion work on the whole token as before.
func TestHolderIdentity(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	ctx := context.Background()
	ttl := 200 * time.Millisecond
	m := newManager(t, srv.Client(t), lease.WithTTL(ttl), lease.WithHolder("worker-7.example:4242"))
	other := newManager(t, srv.Client(t), lease.WithTTL(ttl))

	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Holder(); got != "worker-7.example:4242" {
		t.Fatalf("Holder() = %q", got)
	}
	v := raw.Get(ctx, "tenure:{job}").Val()
	if v != l.Token() || lease.HolderOf(v) != "worker-7.example:4242" {
		t.Fatalf("stored %q, token %q, HolderOf %q", v, l.Token(), lease.HolderOf(v))
	}
	if !strings.HasPrefix(v, v[:32]+".") || strings.Trim(v[:32], "0123456789abcdef") != "" {
		t.Fatalf("token %q: want 32 hex digits, '.', the identity", v)
	}
	// Renewed across several TTLs: the renewal compares the whole token.
	time.Sleep(5 * ttl)
	if l.Err() != nil {
		t.Fatalf("lost while renewing: %v", l.Err())
	}
	if _, err := other.TryAcquire(ctx, "job"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("a second holder got the name: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	o, err := other.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if o.Holder() != "" || lease.HolderOf(raw.Get(ctx, "tenure:{job}").Val()) != "" {
		t.Fatalf("a manager without WithHolder reports holder %q", o.Holder())
	}
	_ = o.Release(ctx)

	// A fair waiter's token carries it too.
	f, err := m.Acquire(ctx, "fair", lease.WithFair(true))
	if err != nil {
		t.Fatal(err)
	}
	if f.Holder() != "worker-7.example:4242" {
		t.Fatalf("fair lease holder %q", f.Holder())
	}
	_ = f.Release(ctx)
}

func TestHolderIdentityRejected(t *testing.T) {
	srv := redistest.Start(t)
	for _, id := range []string{"", strings.Repeat("x", 129), "tab\there", "bad\xffutf8", "nl\n", "h}", "{h", "a}b"} {
		if _, err := lease.New(srv.Client(t), lease.WithHolder(id)); !errors.Is(err, lease.ErrInvalidOption) {
			t.Errorf("WithHolder(%q): %v, want ErrInvalidOption", id, err)
		}
	}
}
