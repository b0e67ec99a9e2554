package backend

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Slot is slot, for the external tests that compare it with a Cluster's.
var Slot = slot

// RenewNode runs renew_node.lua on node c for the leases (keys, tokens) at
// ttl, refreshing no counter, and returns its answer.
func RenewNode(ctx context.Context, c *redis.Client, ttl time.Duration, keys, tokens []string) ([]int64, error) {
	call := &renewCall{batch: true, node: true, args: []any{ttl.Milliseconds()}, leases: keys}
	for i, tok := range tokens {
		call.idx = append(call.idx, i)
		call.tokens = append(call.tokens, tok)
	}
	call.build()
	cmd := renewNodeScript.command(ctx, true, call.keys, call.args...)
	_ = c.Process(ctx, cmd)
	return cmd.Int64Slice()
}
