package redisson

import (
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/tenure-go/tenure/lease"
)

// Defaults, Redisson's where it has one.
const (
	// DefaultWatchdogTimeout is Redisson's Config.lockWatchdogTimeout: a
	// lock taken without a lease time lives this long past each renewal.
	DefaultWatchdogTimeout = 30 * time.Second
	// DefaultUnlockLatchTimeout is how long an unlock's latch key
	// remembers its answer, or the watchdog timeout if shorter (no key
	// of a lock outlives its last holder by more than a TTL,
	// docs/design.md S6). Redisson sizes its own from its timeout and
	// retry settings: (3s + retry delay) × 3 retries with its defaults,
	// about 13.5s; tenure resends an unlock once, and only within half
	// of it.
	DefaultUnlockLatchTimeout = 10 * time.Second
	// DefaultFairLockWaitTimeout is Redisson's Config.fairLockWaitTimeout
	// (3.46+; before, the threadWaitTime getFairLock gave every
	// RFairLock): how long past its expected turn a fair waiter keeps its
	// place before others may presume it dead and skip it.
	DefaultFairLockWaitTimeout = 5 * time.Minute
	// MinWatchdogTimeout is the shortest watchdog timeout accepted: below
	// it the drift and the watchdog's slack leave no room for a renewal.
	MinWatchdogTimeout = 100 * time.Millisecond
)

// Sharding says how release messages travel on a Cluster: as Redisson's
// ClusterServersConfig.shardedSubscriptionMode does.
type Sharding int

const (
	// ShardedAuto: SPUBLISH on a Cluster whose servers have it (Redis 7.0
	// and later), PUBLISH elsewhere: Redisson's default (AUTO, since 3.22).
	ShardedAuto Sharding = iota
	// ShardedOff: PUBLISH everywhere, for Java clients configured with
	// shardedSubscriptionMode OFF (or older than Redisson 3.22).
	ShardedOff
)

// An Option configures a Client (New). Bad values make New fail with an
// error wrapping lease.ErrInvalidOption.
type Option func(*config) error

type config struct {
	clientID    string
	ttl         time.Duration
	javaTTL     time.Duration
	namePrefix  string
	sharding    Sharding
	driftFactor float64
	driftExtra  time.Duration
	latch       time.Duration
	latchSet    bool
	opTimeout   time.Duration
	fairWait    time.Duration
	backoff     func() backoff.BackOff
}

func defaults() config {
	return config{
		ttl:         DefaultWatchdogTimeout,
		javaTTL:     DefaultWatchdogTimeout,
		driftFactor: lease.DefaultDriftFactor,
		driftExtra:  lease.DefaultDriftExtra,
		latch:       DefaultUnlockLatchTimeout,
		opTimeout:   5 * time.Second,
		fairWait:    DefaultFairLockWaitTimeout,
		backoff:     defaultBackOff,
	}
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: redisson: "+format, append([]any{lease.ErrInvalidOption}, a...)...)
}

// WithClientID sets the client id, the first half of every field this
// Client writes: Redisson's is a random UUID per RedissonClient (the
// default here too, fresh for each Client). Two Clients, in one process or
// two, must never share one unless they mean to be one owner.
func WithClientID(id string) Option {
	return func(c *config) error {
		if id == "" || len(id) > 256 {
			return invalid("client id must be 1 to 256 bytes, got %d", len(id))
		}
		c.clientID = id
		return nil
	}
}

// WithWatchdogTimeout sets the TTL of the locks this Client takes, renewed
// every third of it: Redisson's lockWatchdogTimeout (default 30s, renewed
// every 10s). A lock's context is cancelled by its local deadline, sent +
// ttl − drift (docs/design.md S2).
func WithWatchdogTimeout(ttl time.Duration) Option {
	return func(c *config) error {
		if ttl < MinWatchdogTimeout {
			return invalid("watchdog timeout %v is below %v", ttl, MinWatchdogTimeout)
		}
		c.ttl = ttl
		return nil
	}
}

// WithJavaWatchdogTimeout tells the Client the shortest lockWatchdogTimeout
// of the Java services that read-lock the same names (default 30s). A Java
// reader's renewal sets the read-write lock's hash to its own watchdog
// time outright, shortening any longer TTL a Go reader gave it, and a
// reader's unlock gives the hash the longest life left among the read
// entries; so a Go TTL above a Java one could see the hash expire before
// the Go reader's local deadline. New refuses a WithWatchdogTimeout above
// this.
func WithJavaWatchdogTimeout(ttl time.Duration) Option {
	return func(c *config) error {
		if ttl < MinWatchdogTimeout {
			return invalid("Java watchdog timeout %v is below %v", ttl, MinWatchdogTimeout)
		}
		c.javaTTL = ttl
		return nil
	}
}

// WithNamePrefix maps every name as a Redisson NameMapper that prepends
// prefix does: the lock "orders" of a Client WithNamePrefix("app1:") is
// the hash "app1:orders", its channel "redisson_lock__channel:{app1:orders}".
// Java's side must use a NameMapper whose map(name) is prefix + name.
func WithNamePrefix(prefix string) Option {
	return func(c *config) error {
		if len(prefix) > 1024 {
			return invalid("name prefix over 1024 bytes")
		}
		c.namePrefix = prefix
		return nil
	}
}

// WithSharding chooses how releases are published on a Cluster (default
// ShardedAuto, as Redisson). Waiters listen to both kinds on a Cluster
// whatever this says, so that they hear every Java client.
func WithSharding(s Sharding) Option {
	return func(c *config) error {
		if s != ShardedAuto && s != ShardedOff {
			return invalid("unknown sharding mode %d", s)
		}
		c.sharding = s
		return nil
	}
}

// WithDrift sets the margin between a TTL and the local deadline:
// factor·ttl + extra (default lease.DefaultDriftFactor and
// lease.DefaultDriftExtra, Redlock's).
func WithDrift(factor float64, extra time.Duration) Option {
	return func(c *config) error {
		if !(factor >= 0 && factor < 1) || extra < 0 {
			return invalid("drift factor %v must be in [0, 1) and extra %v not negative", factor, extra)
		}
		c.driftFactor, c.driftExtra = factor, extra
		return nil
	}
}

// WithUnlockLatchTimeout sets how long an unlock's latch key,
// redisson_unlock_latch:{NAME}:<request id>, remembers its answer (default
// DefaultUnlockLatchTimeout, or the watchdog timeout if shorter; never
// more than the watchdog timeout): an unlock whose reply was lost is
// resent within half of it and answered from the latch rather than
// applied twice.
func WithUnlockLatchTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond {
			return invalid("unlock latch timeout %v is below 1ms", d)
		}
		c.latch, c.latchSet = d, true
		return nil
	}
}

// WithOpTimeout bounds each round trip that has no context of the
// caller's to end it: an unlock's retry and the cleanup after a failed
// acquire (default 5s).
func WithOpTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return invalid("op timeout %v must be positive", d)
		}
		c.opTimeout = d
		return nil
	}
}

// WithFairLockWaitTimeout sets the wait a fair waiter queues with when its
// context has no deadline (Redisson's fairLockWaitTimeout, default
// DefaultFairLockWaitTimeout): its place times out that long after the
// time its turn was expected, in this host's clock, and any client may
// then drop it from the queue. Set it as the Java services set theirs:
// each waiter's timeout is measured from the one before it.
func WithFairLockWaitTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond {
			return invalid("fair lock wait timeout %v is below 1ms", d)
		}
		c.fairWait = d
		return nil
	}
}

// WithBackOff sets the pauses between attempts of a waiting Lock, each
// also capped by the holder's remaining TTL; a release message ends a
// pause at once. newBackOff is called once per Lock; its Stop ends the
// wait with lease.ErrNotAcquired. The default grows from 50ms to 1s.
func WithBackOff(newBackOff func() backoff.BackOff) Option {
	return func(c *config) error {
		if newBackOff == nil {
			return invalid("nil backoff")
		}
		c.backoff = newBackOff
		return nil
	}
}

func defaultBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.MaxInterval = time.Second
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}

func (c *config) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*c.driftFactor) + c.driftExtra
}

func (c *config) check() error {
	if !c.latchSet {
		c.latch = min(c.latch, c.ttl)
	}
	if c.latch > c.ttl {
		return invalid("unlock latch timeout %v exceeds the watchdog timeout %v: a latch would outlive its lock", c.latch, c.ttl)
	}
	if c.ttl > c.javaTTL {
		return invalid("watchdog timeout %v exceeds the Java services' %v (WithJavaWatchdogTimeout): a Java reader's renewal would cut a Go reader's TTL short", c.ttl, c.javaTTL)
	}
	if c.drift(c.ttl) >= c.ttl-c.ttl/3 {
		return invalid("drift %v leaves no room for a renewal every %v of a %v TTL", c.drift(c.ttl), c.ttl/3, c.ttl)
	}
	return nil
}

// String returns the mode's name, Redisson's.
func (s Sharding) String() string {
	switch s {
	case ShardedAuto:
		return "AUTO"
	case ShardedOff:
		return "OFF"
	}
	return fmt.Sprintf("Sharding(%d)", int(s))
}
