// Package exampleredis gives the examples their Redis: the server REDIS_URL
// names, or else an embedded in-process miniredis whose keys expire in real
// time, so that every example runs on a fresh machine.
package exampleredis

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Redis is the server an example uses.
type Redis struct {
	// Options reach the server, with ContextTimeoutEnabled set so that a
	// context bounds each round trip.
	Options *redis.Options
	// Suffix is added to names on a shared server (REDIS_URL), so that runs
	// do not collide; it is empty on the embedded server.
	Suffix string
	// About says which server this is, for the example's output.
	About string

	stop func()
}

// Start connects to REDIS_URL, checking it answers, or starts an embedded
// server.
func Start(ctx context.Context) (*Redis, error) {
	if url := os.Getenv("REDIS_URL"); url != "" {
		opts, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		opts.ContextTimeoutEnabled = true
		c := redis.NewClient(opts)
		defer c.Close()
		if err := c.Ping(ctx).Err(); err != nil {
			return nil, fmt.Errorf("redis at %s: %w", opts.Addr, err)
		}
		return &Redis{
			Options: opts,
			Suffix:  "-" + strings.ToLower(rand.Text()[:8]),
			About:   fmt.Sprintf("using REDIS_URL (%s)", opts.Addr),
			stop:    func() {},
		}, nil
	}
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return nil, fmt.Errorf("embedded redis: %w", err)
	}
	stopClock := followRealTime(mr)
	return &Redis{
		Options: &redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true},
		About:   fmt.Sprintf("REDIS_URL is not set; started an embedded Redis (miniredis) at %s", mr.Addr()),
		stop:    func() { stopClock(); mr.Close() },
	}, nil
}

// Close stops the embedded server, if Start started one. Clients made from
// Options should be closed first.
func (r *Redis) Close() { r.stop() }

// followRealTime makes mr's keys expire in real time: miniredis ages TTLs
// only when told to, so a goroutine fast-forwards it by the time elapsed,
// every 5ms. stop ends the goroutine and waits for it.
func followRealTime(mr *miniredis.Miniredis) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				mr.FastForward(now.Sub(last))
				last = now
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// Connect is Start for an example that needs one client: it says which
// server it uses, and returns a client, the name suffix, and a func that
// closes the client and stops the server.
func Connect(ctx context.Context, say func(string, ...any)) (client *redis.Client, suffix string, closeRedis func(), err error) {
	r, err := Start(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	say("redis: %s", r.About)
	client = redis.NewClient(r.Options)
	return client, r.Suffix, func() { client.Close(); r.Close() }, nil
}
