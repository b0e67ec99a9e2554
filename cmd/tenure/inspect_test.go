package main

// status, list and release --force of a lease and a reentrant lock.

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/reentrant"
)

func TestStatusListRelease(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	m, err := lease.New(c, lease.WithLogger(quietLogger()), lease.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.Acquire(ctx, "inspect-lease")
	if err != nil {
		t.Fatal(err)
	}
	lk := reentrant.New(m)
	rctx := reentrant.WithOwner(ctx, "job-7")
	r1, err := lk.Lock(rctx, "inspect-reentrant")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := lk.Lock(r1.Context(), "inspect-reentrant")
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Unlock(ctx)
	defer r2.Unlock(ctx)

	checkListStatus(t, l)
	checkReleaseForce(t, c, l)
}

// checkListStatus checks list, list --json and status while l holds
// "inspect-lease" and job-7 "inspect-reentrant" twice.
func checkListStatus(t *testing.T, l *lease.Lease) {
	code, out, stderr := result(t, tenure("list", "--json", "inspect-*"))
	if code != 0 {
		t.Fatalf("list: %d %s", code, stderr)
	}
	var hs []holding
	if err := json.Unmarshal([]byte(out), &hs); err != nil {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	if len(hs) != 2 || hs[0].Name != "inspect-lease" || hs[1].Name != "inspect-reentrant" {
		t.Fatalf("list: %+v", hs)
	}
	if h := hs[0]; h.Kind != "lease" || h.Fence != l.Fence() || h.TTLms <= 0 || h.TTLms > 1000 {
		t.Errorf("lease: %+v (fence %d)", h, l.Fence())
	}
	if h := hs[1]; h.Kind != "reentrant" || h.Owners["job-7"] != 2 {
		t.Errorf("reentrant lock: %+v", h)
	}
	if strings.Contains(out, l.Token()) {
		t.Error("list shows the lease's token")
	}
	code, out, _ = result(t, tenure("list", "inspect-*"))
	if code != 0 || !strings.Contains(out, "inspect-reentrant") || !strings.Contains(out, "job-7×2") {
		t.Errorf("list text: %d\n%s", code, out)
	}
	code, out, _ = result(t, tenure("status", "inspect-lease"))
	if code != 0 || !strings.Contains(out, "kind     lease") || !strings.Contains(out, strconv.FormatInt(l.Fence(), 10)) {
		t.Errorf("status: %d\n%s", code, out)
	}
	// The waiters are "waiting", as in the JSON.
	if !strings.Contains(out, "waiting  0") || strings.Contains(out, "queued") {
		t.Errorf("status does not call the waiters as its JSON does (waiting):\n%s", out)
	}
	code, out, _ = result(t, tenure("status", "--json", "nobody-holds-this"))
	if code != 0 || !strings.Contains(out, `"kind": "free"`) {
		t.Errorf("status of a free name: %d\n%s", code, out)
	}
}

// checkReleaseForce checks release --force of l's name, which its holder
// learns of, then of a free name and of the reentrant lock.
func checkReleaseForce(t *testing.T, c *redis.Client, l *lease.Lease) {
	ctx := context.Background()
	// release --force --now removes the lease and tells the waiters.
	ps := c.Subscribe(ctx, "tenure:{inspect-lease}:released")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := result(t, tenure("release", "--force", "--now", "inspect-lease"))
	if code != 0 || !strings.Contains(out, `removed the lease on "inspect-lease"`) {
		t.Errorf("release: %d %q %q", code, out, stderr)
	}
	mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := ps.ReceiveMessage(mctx); err != nil {
		t.Errorf("no release message: %v", err)
	}
	select {
	case <-l.Done():
	case <-time.After(15 * time.Second):
		t.Error("the holder did not learn of the loss")
	}
	code, out, _ = result(t, tenure("release", "--force", "inspect-lease"))
	if code != 0 || !strings.Contains(out, "nothing removed") {
		t.Errorf("second release: %d %q", code, out)
	}
	code, out, _ = result(t, tenure("release", "--force", "inspect-reentrant"))
	if code != 0 || !strings.Contains(out, "job-7×2") {
		t.Errorf("release of the reentrant lock: %d %q", code, out)
	}
}
