// Package exampleredis gives the examples their Redis: the server REDIS_URL
// names, or else an embedded in-process miniredis whose keys expire in real
// time, so that every example runs on a fresh machine. It makes and closes
// their clients, and removes what a run leaves on a shared server.
package exampleredis

import (
	"context"
	"crypto/fips140"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/lease"
)

// Keys names the keys of a name under the default prefix, which the examples
// use (docs/design.md section 3).
var Keys = keys.Layout{Prefix: lease.DefaultKeyPrefix}

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

	mu      sync.Mutex
	clients []*redis.Client // made by NewClient, closed by Close
	stop    func()
}

// errNeedsServer is why an example in FIPS 140 mode does not start the
// embedded server.
var errNeedsServer = errors.New("FIPS 140 mode: the embedded Redis (miniredis) hashes scripts with SHA-1, which this mode forbids; set REDIS_URL to a Redis server (tenure itself takes its scripts' hashes from the server)")

// Start connects to REDIS_URL, checking it answers, or starts an embedded
// server (not in FIPS 140 mode: errNeedsServer).
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
	if fips140.Enabled() {
		// miniredis hashes each script with SHA-1 itself, which FIPS 140
		// mode forbids (in fips140=only, a panic); tenure does not.
		return nil, errNeedsServer
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

// NewClient returns a client of the server, which Close closes.
func (r *Redis) NewClient() *redis.Client {
	c := redis.NewClient(r.Options)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clients = append(r.clients, c)
	return c
}

// Close closes the clients NewClient made, then stops the embedded server,
// if Start started one. Managers using those clients should be closed first.
func (r *Redis) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.clients {
		_ = c.Close() // an example may have closed it already, as a cut-off leader's
	}
	r.stop()
}

// Cleanup deletes keys a run leaves on a shared server (REDIS_URL), where
// they would outlive it, and reports nothing: it is a courtesy to the
// server, not part of the story. On the embedded server, which takes its
// keys with it, it does nothing. It has a client of its own, since the
// example may have closed its clients, and outlives ctx's cancellation.
func (r *Redis) Cleanup(ctx context.Context, leftover ...string) {
	if r.Suffix == "" {
		return
	}
	c := redis.NewClient(r.Options)
	defer c.Close()
	c.Del(context.WithoutCancel(ctx), leftover...)
}

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

// Connect is Start for an example: it also says which server it uses.
func Connect(ctx context.Context, say func(string, ...any)) (*Redis, error) {
	r, err := Start(ctx)
	if err != nil {
		return nil, err
	}
	say("redis: %s", r.About)
	return r, nil
}
