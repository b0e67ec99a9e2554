package lease

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
)

// NewQuorum returns a Manager in quorum mode (the Redlock algorithm) over
// clients, one per independent Redis primary: servers that share nothing, no
// replication between them, no Cluster. Use an odd number, at least three;
// five tolerate two failed servers. The caller keeps and closes the clients
// after the Manager. Options are those of New and are validated here.
//
// Every request goes to all servers at once, and counts when a majority
// (N/2+1) confirms it:
//
//   - An acquire holds the name when a majority set it and answered within
//     the lease's validity: its local deadline is, as in New's mode, the
//     send time plus the TTL minus the drift margin, and an answer that
//     came after that is no lease. An attempt that cannot reach a majority
//     takes back what it set, on every server.
//   - A renewal needs a majority; a renewal that a majority cannot confirm
//     any more (more than N - majority servers no longer have the lease)
//     loses the lease; anything else is retried until the local deadline.
//   - A release goes to every server, and frees the name as soon as a
//     majority deleted it.
//   - Calls do not wait for a slow or paused server once a majority decided
//     them.
//
// Fencing: each server hands out fences from a counter of its own; a lease's
// fence is the largest among its majority, and before the acquire counts
// every server of the majority raises its counter to it (a second round
// trip, only when their counters differ). Any two majorities share a
// server, and that server's counter orders them; and every server's fence
// is at least its own clock in microseconds (max(counter + 1, TIME)), so a
// server that lost its counter, or came back with an older one, still
// orders them while the servers' clocks agree to within the time between
// two acquisitions. Mutual exclusion holds while
// no majority of the servers loses the lease's keys (a restart without
// persistence is a loss: restart such a server only after a TTL, as the
// Redlock algorithm asks) and under the clock assumptions of the package
// documentation.
//
// Supported: leases, TryAcquire, Acquire, Do, Extend, Release, hooks,
// WithReplicaAcks (on every server). Not supported, refused with an error
// wrapping errors.ErrUnsupported: reentrant locks (package reentrant),
// WithFair, and Lease.Exec (a transaction cannot span servers).
//
// Waiting by notification: waiters listen for release messages on the
// first client's server only (every release is published on every server).
// When that server is down, waiters fall back to their backoff, capped by
// the holder's remaining TTL as always.
func NewQuorum(clients []redis.UniversalClient, opts ...Option) (*Manager, error) {
	if len(clients) == 0 {
		return nil, fmt.Errorf("%w: no Redis client", ErrInvalidOption)
	}
	seen := make(map[redis.UniversalClient]bool, len(clients))
	for i, c := range clients {
		if c == nil || isNilPointer(c) {
			return nil, fmt.Errorf("%w: Redis client %d is nil", ErrInvalidOption, i)
		}
		if seen[c] {
			return nil, fmt.Errorf("%w: Redis client %d is given twice", ErrInvalidOption, i)
		}
		seen[c] = true
	}
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.fair {
		return nil, fmt.Errorf("%w: quorum mode: fair queues: %w", ErrInvalidOption, errors.ErrUnsupported)
	}
	nodes := make([]*backend.Redis, len(clients))
	bound := true
	for i, c := range clients {
		nodes[i] = cfg.redisBackend(c)
		bound = bound && ctxBound(c)
	}
	m := newManager(backend.NewQuorum(nodes, cfg.opTimeout), cfg)
	m.quorum = true
	m.ctxBound = bound
	m.notify = newNotifier(clients[0])
	return m, nil
}

// supports refuses, before any round trip, what the manager's deployment
// cannot do.
func (m *Manager) supports(a acquireConfig) error {
	if !m.quorum {
		return nil
	}
	switch {
	case a.owner != "":
		return fmt.Errorf("lease: quorum mode: reentrant locks: %w", errors.ErrUnsupported)
	case a.limit > 0:
		return fmt.Errorf("lease: quorum mode: semaphores: %w", errors.ErrUnsupported)
	case a.fair:
		return fmt.Errorf("lease: quorum mode: fair queues: %w", errors.ErrUnsupported)
	}
	return nil
}
