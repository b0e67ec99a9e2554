package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/lease"
)

// TestOlderBuildExcludes: a lease taken by the library before issue 50
// (bench/legacy50's scripts, as commit 33b741b sent them) and one taken by
// this build on the same name exclude each other, each way, and a fence
// handed out after the other build's release is above the other's. Issue 50
// kept the keys and their values, and changed only the order in which the
// scripts do their work; this is the CHANGELOG's word that builds before and
// after it may share names.
func TestOlderBuildExcludes(t *testing.T) {
	srv, err := startLoopbackServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c, _ := newClient(srv.Addr(), 2)
	defer c.Close()
	ctx := context.Background()
	m, err := lease.New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	layout := keys.Layout{Prefix: lease.DefaultKeyPrefix}
	const ttl = 10 * time.Second
	fenceOf := func(name string) int64 {
		f, err := c.Get(ctx, layout.Fence(name)).Int64()
		if err != nil {
			t.Fatalf("the fencing counter of %q: %v", name, err)
		}
		return f
	}

	// The older build holds: this build is kept out, then gets the name
	// once it is released, with a higher fence.
	if err := legacyTake(ctx, c, layout, "a", "old-token-1", ttl); err != nil {
		t.Fatalf("the older build's acquire: %v", err)
	}
	old := fenceOf("a")
	if _, err := m.TryAcquire(ctx, "a"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("this build's TryAcquire of a name the older build holds: %v, want ErrNotAcquired", err)
	}
	if err := legacyLetGo(ctx, c, layout, "a", "old-token-1", ttl); err != nil {
		t.Fatalf("the older build's release: %v", err)
	}
	l, err := m.TryAcquire(ctx, "a")
	if err != nil {
		t.Fatalf("this build's TryAcquire after the older build's release: %v", err)
	}
	if l.Fence() <= old {
		t.Errorf("fence %d after the older build's %d: not above it", l.Fence(), old)
	}

	// This build holds: the older build is kept out, and gets the name
	// once it is released, with a higher fence.
	if err := legacyTake(ctx, c, layout, "a", "old-token-2", ttl); !errors.Is(err, errFloorNotTaken) {
		t.Fatalf("the older build's acquire of a name this build holds: %v, want not taken", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := legacyTake(ctx, c, layout, "a", "old-token-3", ttl); err != nil {
		t.Fatalf("the older build's acquire after this build's release: %v", err)
	}
	if f := fenceOf("a"); f <= l.Fence() {
		t.Errorf("the older build's fence %d after this build's %d: not above it", f, l.Fence())
	}
	if err := legacyLetGo(ctx, c, layout, "a", "old-token-3", ttl); err != nil {
		t.Fatal(err)
	}
}
