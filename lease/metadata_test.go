package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/semaphore"
	"github.com/tenure-go/tenure/tests/redistest"
)

// An acquisition's metadata is stored in its value beside the holder
// identity, read back by Lease.Metadata and MetadataOf, and does not
// disturb the holder identity, renewal or release; a permit carries it too.
func TestMetadata(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t), lease.WithHolder("host.example/42"), lease.WithTTL(time.Second))
	ctx := context.Background()
	const md = "job=nightly.7 logs=https://ci.example/run/7"
	l, err := m.Acquire(ctx, "job", lease.WithMetadata(md))
	if err != nil {
		t.Fatal(err)
	}
	if l.Metadata() != md || l.Holder() != "host.example/42" {
		t.Fatalf("Metadata %q Holder %q", l.Metadata(), l.Holder())
	}
	v := raw.Get(ctx, "tenure:{job}").Val()
	if lease.MetadataOf(v) != md || lease.HolderOf(v) != "host.example/42" {
		t.Fatalf("stored value: metadata %q, holder %q", lease.MetadataOf(v), lease.HolderOf(v))
	}
	time.Sleep(1500 * time.Millisecond) // renewed meanwhile
	if l.Err() != nil {
		t.Fatalf("lost: %v", l.Err())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Without metadata, nothing follows the identity.
	l2, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if got := raw.Get(ctx, "tenure:{job}").Val(); l2.Metadata() != "" || lease.HolderOf(got) != "host.example/42" {
		t.Fatalf("no metadata: %q, holder %q", l2.Metadata(), lease.HolderOf(got))
	}
	p, err := semaphore.New(m).Acquire(ctx, "builders", 2, lease.WithMetadata("builder 3"))
	if err != nil {
		t.Fatal(err)
	}
	members := raw.ZRange(ctx, "tenure:{builders}", 0, -1).Val()
	if len(members) != 1 || lease.MetadataOf(members[0]) != "builder 3" || p.Metadata() != "builder 3" {
		t.Fatalf("permit members %q, metadata %q", members, p.Metadata())
	}
	for _, bad := range []string{strings.Repeat("x", lease.MaxMetadataLen+1), "a{b", "tab\there", "\xff", "sep\x1e"} {
		if _, err := m.TryAcquire(ctx, "bad", lease.WithMetadata(bad)); !errors.Is(err, lease.ErrInvalidOption) {
			t.Errorf("metadata %q: %v, want ErrInvalidOption", bad, err)
		}
	}
}
