package main

// "tenure release --force --redisson NAME": a Redisson lock revoked in a
// form Java clients respect (redisson_revoke.lua), and the confirmation
// with which a revoked "tenure run --redisson" frees it once its command
// is dead (redisson_confirm.lua).

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
)

var (
	//go:embed scripts/redisson_publish.lua
	redissonPublishSrc string
	//go:embed scripts/redisson_revoke.lua
	redissonRevokeSrc string
	//go:embed scripts/redisson_confirm.lua
	redissonConfirmSrc string

	redissonRevoke  = backend.NewScript(redissonPublishSrc + redissonRevokeSrc)
	redissonConfirm = backend.NewScript(redissonPublishSrc + redissonConfirmSrc)
)

// redissonRevokedPrefix starts a revocation field: it replaces a holder's
// field <client id>:<thread id> in the lock's hash, and no Redisson owner's
// field starts with it.
const redissonRevokedPrefix = "tenure-revoked:"

// redissonKeys are a Redisson lock's hash and its two channels (an RLock's
// and an RReadWriteLock's), as the scripts take them, and the publish
// command: SPUBLISH on a Cluster, as package redisson's default.
func redissonKeys(c redis.UniversalClient, name string) ([]string, string) {
	tag := "{" + name + "}"
	if strings.Contains(name, "{") {
		tag = name
	}
	publish := "PUBLISH"
	if _, ok := c.(*redis.ClusterClient); ok {
		publish = "SPUBLISH"
	}
	return []string{name, "redisson_lock__channel:" + tag, "redisson_rwlock:" + tag}, publish
}

// releaseRedisson is "tenure release --force [--now] --redisson NAME".
func (g *globals) releaseRedisson(out io.Writer, name string, now bool) error {
	ctx := context.Background()
	client, err := g.connectFor(ctx, "")
	if err != nil {
		return err
	}
	defer client.Close()
	if client.quorum() {
		return fail(exitUsage, "release --force --redisson is not supported in quorum mode (several --redis): "+
			"a Redisson lock lives on one server or Cluster, as Redisson keeps it")
	}
	keys, publish := redissonKeys(client.one(), name)
	mode := "revoke"
	if now {
		mode = "now"
	}
	res, err := redissonRevoke.Run(ctx, client.one(), keys, publish, redissonRevokedPrefix, mode).Slice()
	if err != nil {
		return g.redisFailure(fmt.Sprintf("releasing Redisson lock %q (the release --force --redisson script)", name), err)
	}
	what, _ := res[0].(string)
	if what == "none" {
		fmt.Fprintf(out, "Redisson lock %q was not held; nothing removed\n", name)
		return nil
	}
	pttl, _ := res[1].(int64)
	left := time.Duration(pttl) * time.Millisecond
	if what == "type" {
		return fail(exitError, "%q holds a %v, not a Redisson lock (a hash): nothing changed", name, res[2])
	}
	owners := fieldPairsText(res[2:])
	switch {
	case what == "already":
		fmt.Fprintf(out, "Redisson lock %q is already revoked (%s left): it is freed once its holder confirms that its work is dead, "+
			"or at that TTL; --now frees it at once\n", name, left)
	case what == "revoked":
		fmt.Fprintf(out, "revoked Redisson lock %q held by %s; it stays held for every Java and Go locker until its holder "+
			"confirms that its work is dead, or for %v at most (its TTL)\n", name, owners, left)
	case strings.Contains(owners, redissonRevokedPrefix) && !strings.Contains(owners, ", "):
		fmt.Fprintf(out, "removed the revocation of Redisson lock %q (%s); waiters notified\n", name, owners)
	default:
		fmt.Fprintf(out, "removed Redisson lock %q held by %s; waiters notified\n", name, owners)
		if now && pttl > 0 {
			fmt.Fprintf(g.stderr, "tenure: --now: %q is free at once, but its holder's work may still run for up to %v "+
				"(its TTL) beside the next holder's: without --now the name would stay held until the holder "+
				"confirmed its work dead\n", name, left)
		}
	}
	return nil
}

// fieldPairsText is "field (count), ..." of a script's field, count pairs.
func fieldPairsText(pairs []any) string {
	owners := map[string]int64{}
	for i := 0; i+1 < len(pairs); i += 2 {
		f, _ := pairs[i].(string)
		var n int64
		_, _ = fmt.Sscan(fmt.Sprint(pairs[i+1]), &n)
		owners[f] = n
	}
	if len(owners) == 0 {
		return "no owner"
	}
	return ownersText(owners)
}

// confirmRedisson tells Redis that the holder of field on the Redisson
// lock name, whose hold was force-unlocked, has nothing running any more:
// it takes the holder's revocation field out of the hash, if release
// --force --redisson left one, which frees the name when it was the last.
// It reports whether it found one. An error is ignored: a revocation
// nobody confirms expires with the hash's TTL.
func confirmRedisson(ctx context.Context, c redis.UniversalClient, name, field string) bool {
	keys, publish := redissonKeys(c, name)
	n, err := redissonConfirm.Run(ctx, c, keys, publish, redissonRevokedPrefix+field).Int()
	return err == nil && n > 0
}

// redissonRevokedText is why's words for a Redisson lock that release
// --force --redisson revoked.
const redissonRevokedText = `"tenure release --force --redisson" revoked it; once its command was dead, tenure confirmed it, which freed the name`

// redissonLost is run --redisson's exit after its lock was lost while
// the command ran: once the command's group is gone (dead), it confirms a
// revocation release --force --redisson left for field, if any, which
// frees the name for the next holder. Any loss may be one (the watchdog's
// renewal may find the field gone before the message is heard), and the
// revocation field is there only if the hold was revoked.
func (r *runner) redissonLost(lost error, dead bool, c redis.UniversalClient, field string) error {
	done := lostDone(lost)
	if dead {
		ctx, cancel := context.WithTimeout(context.Background(), r.releaseTimeout)
		defer cancel()
		if confirmRedisson(ctx, c, r.name, field) {
			done = redissonRevokedText
		}
	}
	return fail(r.o.f.lostExit, "Redisson lock %q was lost %s: %s; %s", r.name, lostWhen(lost), redissonLoss(lost), done)
}

// revokedOf moves the revocation fields of owners into s.Revoked, each
// the field of a holder release --force --redisson revoked.
func (s *redissonStatus) revokedOf() {
	for f, n := range s.Owners {
		if holder, ok := strings.CutPrefix(f, redissonRevokedPrefix); ok {
			if s.Revoked == nil {
				s.Revoked = map[string]int64{}
			}
			s.Revoked[holder] = n
			delete(s.Owners, f)
		}
	}
}
