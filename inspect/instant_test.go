package inspect_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/inspect"
	"github.com/tenure-go/tenure/tests/redistest"
)

// Suspicion (c) of issue 47: a name's kind, holder, fence and leader are
// read at one instant. A writer moves the name from holder to holder, each
// step one transaction (the lease, its fence and its leader record
// together), while Read reads it thousands of times in one call: a long
// pipeline is read by Redis in parts, between which the writer's steps
// run, so without MULTI a Holding could show one holder's value beside
// another's fence or leader.
func TestReadIsOneInstant(t *testing.T) {
	srv := redistest.Start(t)
	writer := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	step := func(i int) error {
		_, err := writer.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "tenure:{mix}", fmt.Sprintf("%032x.h%d", i, i), 0)
			p.Set(ctx, "tenure:{mix}:fence", i, 0)
			p.HSet(ctx, "tenure:{mix}:leader", "identity", fmt.Sprintf("h%d", i), "fence", i)
			return nil
		})
		return err
	}
	if err := step(1); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 2; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := step(i); err != nil && ctx.Err() == nil {
				t.Error(err)
				return
			}
		}
	})
	defer func() {
		close(stop)
		wg.Wait()
	}()
	names := make([]string, 3000)
	for i := range names {
		names[i] = "mix"
	}
	reader := srv.Client(t)
	for range 10 {
		hs, err := inspect.Read(ctx, reader, "", names...)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			want := "h" + strconv.FormatInt(h.Fence, 10)
			if h.Kind != inspect.Lease || h.Holder != want || h.Leader == nil || h.Leader.Identity != want {
				t.Fatalf("a Holding of two instants: kind %s, holder %q, fence %d, leader %+v", h.Kind, h.Holder, h.Fence, h.Leader)
			}
		}
	}
}
