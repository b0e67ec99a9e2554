package backend

import (
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Release messages: classic pub/sub on one server or a Sentinel group,
// sharded pub/sub on a Cluster (docs/design.md section 5). A Cluster
// carries a classic PUBLISH over its bus to every node, so that each node
// pays for every release of every name and the release rate stops growing
// with the Cluster's size; a sharded message (SPUBLISH, Redis 7.0 and
// later) reaches only the nodes of its channel's slot. Publishers and
// subscribers must agree, or no waiter hears anything: they all decide by
// Sharded, from the kind of client alone, so that the choice costs no round
// trip and needs no rights beyond the commands themselves.
var (
	//go:embed scripts/publish.lua
	publishSrc string
	//go:embed scripts/spublish.lua
	spublishSrc string

	plainPublishers   = newPublishers(publishSrc)
	shardedPublishers = newPublishers(spublishSrc)
)

// Sharded reports whether release messages on c's deployment are sharded:
// c is a Cluster client. One server, or a Sentinel group's primary, has no
// bus to broadcast over, and keeps classic pub/sub. On a Cluster of Redis
// older than 7.0 the scripts fall back to PUBLISH (spublish.lua), and a
// subscriber to SUBSCRIBE once a node refuses SSUBSCRIBE (UnknownCommand).
func Sharded(c redis.UniversalClient) bool {
	_, ok := c.(*redis.ClusterClient)
	return ok
}

// PublishLua returns the Lua source that defines publish(channel), which
// sends 'released' on channel as the scripts do where Sharded says
// sharded: another script that tells a name's waiters (the tenure
// command's release --force) prepends it.
func PublishLua(sharded bool) string {
	if sharded {
		return spublishSrc
	}
	return publishSrc
}

// UnknownCommand reports whether err is a server's refusal of a command it
// does not have: SSUBSCRIBE or SPUBLISH on a Redis older than 7.0 ("ERR
// unknown command 'ssubscribe', with args beginning with: ...", the name
// quoted otherwise by some versions).
func UnknownCommand(err error) bool {
	re, ok := replyOf(err)
	return ok && strings.Contains(strings.ToLower(re.Error()), "unknown command")
}

// KeySlot is the Cluster hash slot of a key or a channel (slot.go): a
// subscriber told MOVED for a slot knows which of its channels moved.
func KeySlot(key string) int { return slot(key) }

// publishers are the scripts that publish release messages, built with one
// definition of publish().
type publishers struct {
	release, abandon, leave, downgrade *Script
}

func newPublishers(publish string) *publishers {
	return &publishers{
		release:   NewScript(publish + releaseLeaseSrc + letgoSrc + releaseSrc),
		abandon:   NewScript(publish + letgoSrc + abandonSrc),
		leave:     NewScript(publish + letgoSrc + leaveSrc),
		downgrade: NewScript(fenceSrc + publish + letgoSrc + downgradeSrc),
	}
}

func publishersFor(c redis.UniversalClient) *publishers {
	if Sharded(c) {
		return shardedPublishers
	}
	return plainPublishers
}
