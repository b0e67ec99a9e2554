package election

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
)

// Messages to observers: a new term on P{N}:leader:changed, the lease's
// release on P{N}:released. On a Cluster both are sharded, as the lease's
// release scripts publish it (internal/backend, backend.Sharded): a term
// costs nothing on the primaries that do not own the name, and an observer
// listens on the primary of the name's slot, where both channels live. A
// Cluster of Redis older than 7.0 refuses SPUBLISH and SSUBSCRIBE: once it
// has, the Election sends and listens for classic messages (classic), as
// the scripts publish them there.

// announce publishes a new term's fence on a Cluster. A message that fails
// is not an error: observers read the record at least every RetryPeriod.
func (e *Election) announce(ctx context.Context, fence int64) {
	if !e.classic.Load() {
		err := e.cfg.Client.SPublish(ctx, e.keys.changed, fence).Err()
		if !backend.UnknownCommand(err) {
			return
		}
		e.classic.Store(true)
	}
	_ = e.cfg.Client.Publish(ctx, e.keys.changed, fence).Err()
}

// listen subscribes to the channels that tell of a change of leader and
// waits for both subscriptions, so that no change after the first read
// goes unheard; a failure leaves the polling to catch up. On a Cluster
// whose slot map is stale (MOVED: the slot moved) it reloads the map and
// tries again, a few times.
func (e *Election) listen(ctx context.Context) *redis.PubSub {
	for attempt := 1; ; attempt++ {
		sharded := backend.Sharded(e.cfg.Client) && !e.classic.Load()
		var ps *redis.PubSub
		if sharded {
			ps = e.cfg.Client.SSubscribe(ctx, e.keys.changed, e.keys.released)
		} else {
			ps = e.cfg.Client.Subscribe(ctx, e.keys.changed, e.keys.released)
		}
		var err error
		for range 2 {
			sctx, cancel := context.WithTimeout(ctx, e.period)
			_, err = ps.Receive(sctx)
			cancel()
			if err != nil {
				break
			}
		}
		_, moved := redis.IsMovedError(err)
		switch {
		case sharded && backend.UnknownCommand(err):
			e.classic.Store(true)
		case sharded && moved && attempt < 4:
			e.cfg.Client.(*redis.ClusterClient).ReloadState(ctx)
			if !sleep(ctx, time.Duration(attempt)*100*time.Millisecond) {
				return ps
			}
		default:
			return ps
		}
		_ = ps.Close()
	}
}
