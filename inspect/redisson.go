package inspect

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The kinds of a Redisson lock (ReadRedisson; package redisson).
const (
	// RedissonLock: an RLock or RFencedLock holds the name.
	RedissonLock Kind = "redisson-lock"
	// RedissonRead: readers hold an RReadWriteLock (mode "read").
	RedissonRead Kind = "redisson-read"
	// RedissonWrite: a writer holds an RReadWriteLock (mode "write"); its
	// field ends in ":write", and any other owner field is its own reads.
	RedissonWrite Kind = "redisson-write"
)

// ReadRedisson reads Redisson locks, as Java services (or package
// redisson) hold them: each name's hash at namePrefix+name (namePrefix
// being what a prefixing NameMapper prepends, "" for none), in one
// pipelined round trip. Owners are the hash's fields, <client id>:<thread
// id> (a writer's ending in ":write"), with their re-entry counts; Fence
// is the RFencedLock counter redisson_lock_token:{NAME} (0 when the name
// was never fenced); TTL is the hash's; Waiting is the length of the
// RFairLock queue redisson_lock_queue:{NAME} (0 for other kinds), waiters
// whose timeout has passed included until an attempt drops them. Nothing it returns is a secret: a
// Redisson lock has no token beyond its owner field.
func ReadRedisson(ctx context.Context, c redis.UniversalClient, namePrefix string, names ...string) ([]Holding, error) {
	type rreads struct {
		typ    *redis.StatusCmd
		pttl   *redis.DurationCmd
		fields *redis.MapStringStringCmd
		token  *redis.StringCmd
		queue  *redis.IntCmd
	}
	all := make([]rreads, len(names))
	sent, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, n := range names {
			raw := namePrefix + n
			all[i] = rreads{
				typ:    p.Type(ctx, raw),
				pttl:   p.PTTL(ctx, raw),
				fields: p.HGetAll(ctx, raw),
				token:  p.Get(ctx, redissonPrefixName("redisson_lock_token", raw)),
				queue:  p.LLen(ctx, redissonPrefixName("redisson_lock_queue", raw)),
			}
		}
		return nil
	})
	if err != nil {
		for _, cmd := range sent {
			if e := cmd.Err(); e != nil && !errors.Is(e, redis.Nil) && !redis.HasErrorPrefix(e, "WRONGTYPE") {
				return nil, e
			}
		}
	}
	out := make([]Holding, len(names))
	for i, n := range names {
		r := all[i]
		h := Holding{Name: n, Kind: Kind(r.typ.Val())}
		h.Fence, _ = strconv.ParseInt(r.token.Val(), 10, 64)
		h.Waiting = r.queue.Val()
		switch h.Kind {
		case "none":
			h.Kind = Free
		case "hash":
			f := r.fields.Val()
			switch f["mode"] {
			case "read":
				h.Kind = RedissonRead
			case "write":
				h.Kind = RedissonWrite
			default:
				h.Kind = RedissonLock
			}
			h.Owners = map[string]int64{}
			var parts []string
			for o, v := range f {
				if o == "mode" {
					continue
				}
				h.Owners[o], _ = strconv.ParseInt(v, 10, 64)
				parts = append(parts, o+"="+v)
			}
			sort.Strings(parts)
			h.same = digest(parts)
		}
		if h.Kind != Free {
			h.TTL = -1
			if d := r.pttl.Val(); d >= 0 {
				h.TTL = d
			}
		}
		out[i] = h
	}
	return out, nil
}

// redissonPrefixName is Redisson's RedissonObject.prefixName: a name
// holding a '{' is its own hash tag, any other gets braces.
func redissonPrefixName(prefix, raw string) string {
	if strings.Contains(raw, "{") {
		return prefix + ":" + raw
	}
	return prefix + ":{" + raw + "}"
}
