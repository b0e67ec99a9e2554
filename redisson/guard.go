package redisson

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// ErrForceUnlocked is why a hold ends when a message on its lock's
// channel made it look and its field was gone: a force unlock (Java's
// forceUnlock, or tenure's release --force --redisson) took the lock
// away. A hold's context cause wraps it with lease.ErrLost.
var ErrForceUnlocked = errors.New("force-unlocked: a message on its channel made it look, and its field was gone")

// listenAfter is how long a hold lives before it listens to its lock's
// channel: the longest a force unlock in a hold's first moments goes
// unnoticed, against a subscription (a SUBSCRIBE and an UNSUBSCRIBE on
// the Client's shared connection, and a look) for every short hold.
const listenAfter = 500 * time.Millisecond

// guard listens, for as long as h lives, to its lock's channel, and looks
// at h's field on every message there: a force unlock deletes the hash
// and publishes what a release does, and without this a holder would
// learn of it only at its next renewal, a third of the TTL later (10s at
// Redisson's default). It shares the channel's subscription, and the
// Client's pub/sub connections, with every waiter and holder of the
// Client. It looks once too when the subscription is confirmed, for a
// force between the grant and then, and whenever a message may have been
// missed (a connection broke, a subscription was lost and made anew).
// It starts listening only once h has lived listenAfter: a lock held for
// less (the common cycle of a short critical section) costs no
// subscription, and a force in that time is found by the first look.
func (c *Client) guard(h *hold) {
	defer c.guards.Done()
	t := time.NewTimer(listenAfter)
	select {
	case <-t.C:
	case <-h.ctx.Done():
		t.Stop()
		return
	}
	poke, stop, err := c.notifier.watch(h.key.channel())
	if err != nil {
		return // the Client is closing
	}
	defer stop()
	var every <-chan time.Time
	if h.key.kind == fairLock {
		tick := time.NewTicker(fairLookEvery)
		defer tick.Stop()
		every = tick.C
	}
	for {
		select {
		case <-poke:
		case <-every:
		case <-h.ctx.Done():
			return
		}
		c.look(h)
	}
}

// fairLookEvery is how often a fair lock's holder looks at its field
// besides the messages: Java's RFairLock.forceUnlock publishes only on the
// first waiter's own channel, or nowhere when nobody waits, so its holder
// hears nothing, and would learn of the force at its next renewal (10s at
// Redisson's default). Looking costs an HEXISTS a fair hold every
// fairLookEvery, once the hold has lived listenAfter.
const fairLookEvery = 500 * time.Millisecond

// look ends h with lease.ErrLost when its field is gone from its hash. An
// error leaves h to its watchdog. The field of a hold that is alive never
// comes back once gone (the owner's next entry makes a new hold), so a
// reply that it is gone ends h whenever it comes, unless h was unlocked
// meanwhile (its last Unlock holds h.mu while its script runs).
func (c *Client) look(h *hold) {
	ctx, cancel := context.WithTimeout(h.ctx, c.cfg.opTimeout)
	defer cancel()
	there, err := c.c.HExists(ctx, h.key.raw, h.key.field).Result()
	if err != nil || there {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.count == 0 || h.ctx.Err() != nil {
		return
	}
	_ = c.wd.Remove(h.entry)
	c.forget(h)
	h.cancel(fmt.Errorf("%w: redisson %s %q: %w", lease.ErrLost, h.key.kind, h.key.raw, ErrForceUnlocked))
}
