package backend

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// slot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of its hash
// tag, or of the whole key when it has none, modulo 16384. The renewal of
// many leases in one script call groups them by the slot of their lease
// keys: a script's keys must share a slot. Every key of a name N is P{N}...
// with no brace in P, so its tag is N up to N's first '}' (all of N when
// it has none), whatever follows: the fence key shares the lease key's
// slot, which slot(N) need not be.
func slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc & 16383)
}

// EachPrimary runs fn on c itself, or on every primary of a Cluster client
// at once (go-redis's ForEachMaster): what a SCAN of every key needs.
func EachPrimary(ctx context.Context, c redis.UniversalClient, fn func(context.Context, redis.Cmdable) error) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return fn(ctx, m) })
	}
	return fn(ctx, c)
}
