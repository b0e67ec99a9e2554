package inspect_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/inspect"
	"github.com/tenure-go/tenure/redisson"
	"github.com/tenure-go/tenure/tests/redistest"
)

// A Redisson lock reads back with its kind, owner fields and counts, its
// fenced token and TTL, whoever took it (here package redisson).
func TestReadRedisson(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	o := srv.Options()
	o.MaxRetries = -1 // redisson.New refuses a client that resends
	rc := redis.NewClient(o)
	defer rc.Close()
	cl, err := redisson.New(rc, redisson.WithNamePrefix("app:"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	owner := redisson.WithOwner(ctx, redisson.Owner{ThreadID: 3})
	for range 2 {
		if _, err := cl.GetFencedLock("fenced").Lock(owner); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.GetReadWriteLock("rw").ReadLock().Lock(owner); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.GetReadWriteLock("rw").ReadLock().Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.GetReadWriteLock("w").WriteLock().Lock(owner); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.GetFairLock("fair").Lock(owner); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() { _, err := cl.GetFairLock("fair").Lock(wctx); waited <- err }()
	defer func() { stop(); <-waited }()
	for raw.LLen(ctx, "redisson_lock_queue:{app:fair}").Val() == 0 && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	hs, err := inspect.ReadRedisson(ctx, raw, "app:", "fenced", "rw", "w", "free", "fair")
	if err != nil {
		t.Fatal(err)
	}
	field := cl.ID() + ":3"
	f, rw, w, free, fair := hs[0], hs[1], hs[2], hs[3], hs[4]
	if fair.Kind != inspect.RedissonLock || fair.Owners[field] != 1 || fair.Waiting != 1 {
		t.Errorf("fair lock with a waiter: %+v", fair)
	}
	if f.Kind != inspect.RedissonLock || f.Owners[field] != 2 || len(f.Owners) != 1 || f.Fence != 2 || f.TTL <= 0 {
		t.Errorf("fenced lock: %+v", f)
	}
	if rw.Kind != inspect.RedissonRead || rw.Owners[field] != 1 || len(rw.Owners) != 2 || rw.TTL <= 0 {
		t.Errorf("read lock: %+v", rw)
	}
	if w.Kind != inspect.RedissonWrite || w.Owners[field+":write"] != 1 || len(w.Owners) != 1 {
		t.Errorf("write lock: %+v", w)
	}
	if free.Kind != inspect.Free || free.TTL != 0 || len(free.Owners) != 0 || free.Waiting != 0 {
		t.Errorf("free: %+v", free)
	}
}
