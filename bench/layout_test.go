package main

import (
	"context"
	"testing"
	"time"
)

// TestInCounterPrototypeKeepsItsPromises checks that scenario 9's
// twokey+exists+incounter prototype, whose cost the scenario publishes,
// keeps the promise the release marker exists for: a release resent after
// its reply was lost gets its first answer, whether the name is still free
// (the op in the counter answers), taken again (the acquisition moved the
// op to a marker key of its own) or taken and released again; and a
// release of a lease that was lost is still answered "not held".
func TestInCounterPrototypeKeepsItsPromises(t *testing.T) {
	srv, err := startLoopbackServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c, _ := newClient(srv.Addr(), 2)
	defer c.Close()
	ctx := context.Background()
	l := &protoLocker{c: c, ttl: 10 * time.Second, exists: true, memory: 10 * time.Second, inCounter: true}
	const key = "proto{n}"
	acquire := func(what string) func(context.Context) error {
		t.Helper()
		rel, err := l.acquire(ctx, key)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return rel
	}
	resend := func(what string, rel func(context.Context) error) {
		t.Helper()
		if err := rel(ctx); err != nil {
			t.Errorf("%s: %v, want the first answer (released)", what, err)
		}
	}

	relA := acquire("A acquires")
	resend("A releases", relA)
	resend("A's release resent while the name is free", relA)
	relB := acquire("B acquires")
	resend("A's release resent while B holds the name", relA)
	resend("B releases", relB)
	resend("A's release resent after B released", relA)
	resend("B's release resent", relB)

	relC := acquire("C acquires")
	if err := c.Del(ctx, key).Err(); err != nil { // C's lease is lost
		t.Fatal(err)
	}
	if err := relC(ctx); err == nil {
		t.Error("C's release of a lost lease: answered released, want not held")
	}
}
