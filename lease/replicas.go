package lease

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
)

// ErrTooFewReplicas is wrapped by the error of an Acquire (or TryAcquire, Do)
// that the primary granted but fewer replicas acknowledged than
// WithReplicaAcks asks for. The lease was released again (or, if that
// failed, abandoned in the background): nothing is held. A renewal that too
// few replicas acknowledged counts as failed, and is retried until the
// lease's local deadline.
var ErrTooFewReplicas = backend.ErrTooFewReplicas

// WithReplicaAcks makes every acquire and renewal wait for n replicas to
// acknowledge it: the script is followed by WAIT n timeout in the same
// pipeline, on the same connection (on a Cluster, on the primary of the
// name's slot). It is for a primary with replicas (Sentinel, or a Cluster):
// a lease that a replica acknowledged survives a failover that promotes that
// replica, where an unacknowledged one may vanish with the old primary.
//
// An acquire acknowledged by fewer than n replicas is released again and
// fails with an error wrapping ErrTooFewReplicas. A renewal acknowledged by
// fewer is an unknown outcome: it does not move the local deadline and is
// retried until that deadline, when the lease is lost. The wait adds to
// every acquire's and renewal's round trip: keep timeout well below the
// renewal interval (the watchdog gives a renewal at most half of it). n = 0
// turns acknowledgement off; otherwise timeout must be at least a
// millisecond (WAIT's 0, "forever", is not accepted).
//
// WAIT is not a consensus protocol: a replica that acknowledged can still be
// passed over by a failover (Sentinel promotes the replica it judges most up
// to date, which is one that acknowledged when n equals the number of
// replicas), and Redis can still lose acknowledged writes in corner cases.
// See docs/deployments.md.
func WithReplicaAcks(n int, timeout time.Duration) Option {
	return managerOption(func(c *config) error {
		if n < 0 {
			return fmt.Errorf("%w: replica acknowledgements %d must not be negative", ErrInvalidOption, n)
		}
		if n > 0 && timeout < time.Millisecond {
			return fmt.Errorf("%w: replica acknowledgement timeout %v must be at least 1ms", ErrInvalidOption, timeout)
		}
		c.acks, c.ackTimeout = n, timeout
		return nil
	})
}

// redisBackend returns the backend over one Redis deployment that c
// configures.
func (c *config) redisBackend(client redis.UniversalClient) *backend.Redis {
	be := backend.NewRedis(client, c.prefix)
	if c.acks > 0 {
		be.SetReplicaAcks(c.acks, c.ackTimeout)
	}
	return be
}
