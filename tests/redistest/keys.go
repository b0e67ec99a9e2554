package redistest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// WaitNoKeys waits until c's database holds no key, failing the test with
// what is left. It is for checking that no key outlives its last holder by
// more than ttl: it waits ttl, then polls for a generous bound beyond it
// rather than exactly at it (a key that is never to expire stays however
// long one waits, and a loaded machine makes expiry late). KEYS skips keys
// that expired but that Redis has not reclaimed yet, which DBSIZE counts.
func WaitNoKeys(tb testing.TB, c redis.UniversalClient, ttl time.Duration) {
	tb.Helper()
	ctx := context.Background()
	time.Sleep(ttl)
	deadline := time.Now().Add(ttl + 3*time.Second)
	for {
		keys, err := c.Keys(ctx, "*").Result()
		if err == nil && len(keys) == 0 {
			return
		}
		if time.Now().After(deadline) {
			slices.Sort(keys)
			if len(keys) > 10 {
				keys = append(keys[:10], fmt.Sprintf("... %d in all", len(keys)))
			}
			tb.Fatalf("keys outlive their last holder by more than a TTL (%v): %v (%v)", ttl, keys, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
