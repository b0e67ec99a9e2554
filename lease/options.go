package lease

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cenkalti/backoff/v4"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/keys"
)

// Limits checked before any round trip.
const (
	// MinTTL is the shortest TTL accepted: below it the drift margin and
	// the scheduler's own latency leave no room for a renewal.
	MinTTL = 10 * time.Millisecond
	// MaxNameLen is the longest name accepted, in bytes (1024).
	MaxNameLen = keys.MaxNameLen
)

// Defaults.
const (
	DefaultTTL         = 30 * time.Second
	DefaultKeyPrefix   = keys.DefaultPrefix // "tenure:"
	DefaultDriftFactor = 0.01
	DefaultDriftExtra  = 2 * time.Millisecond
	// DefaultQueueTimeout is how long the fair queue keeps a waiter that
	// stopped asking (its process died) before the next one's turn comes.
	DefaultQueueTimeout = 5 * time.Second
)

// An Option configures a Manager (New). Some options, such as WithTTL, are
// also AcquireOptions and then override the manager's value for one lease.
type Option interface {
	applyManager(*config) error
}

// An AcquireOption configures one Acquire, TryAcquire or Do.
type AcquireOption interface {
	applyAcquire(*acquireConfig) error
}

// A CommonOption sets a manager's default in New and overrides it for one
// lease in Acquire, TryAcquire or Do.
type CommonOption interface {
	Option
	AcquireOption
}

// config is the manager's validated configuration.
type config struct {
	acquireConfig
	prefix      string
	driftFactor float64
	driftExtra  time.Duration
	logger      *slog.Logger
	opTimeout   time.Duration
	hooks       Hooks
	holder      string        // WithHolder: appended to every lease's token
	memory      time.Duration // WithReleaseMemory, as backend.Item.Memory: 0 for the default

	// Replica acknowledgement (WithReplicaAcks, replicas.go).
	acks       int
	ackTimeout time.Duration
}

// acquireConfig is what one acquisition uses; the manager's config supplies
// the defaults.
type acquireConfig struct {
	ttl        time.Duration
	interval   time.Duration // 0: ttl/3
	noRenew    bool
	newBackOff func() backoff.BackOff
	fair       bool
	queue      time.Duration // how long the fair queue keeps a waiter between attempts
	metadata   string        // WithMetadata; "" for none

	// Set for packages reentrant and semaphore, through internal/bridge.
	holding
	resize bool // semaphore.WithResize: a permit request may change the name's N
	count  int  // semaphore.WithCount: how many permits at once (k); 0: not given
}

// holding says what kind of hold an acquisition makes: a lease (the zero
// value), a reentrant lock or a semaphore's permit.
type holding struct {
	owner   string // a reentrant lock's owner; "" otherwise
	limit   int    // a semaphore's permits; 0 otherwise
	permits int    // how many of them the request takes at once (k); 0 means 1
}

func defaultConfig() config {
	return config{
		acquireConfig: acquireConfig{ttl: DefaultTTL, newBackOff: defaultBackOff, queue: DefaultQueueTimeout},
		prefix:        DefaultKeyPrefix,
		driftFactor:   DefaultDriftFactor,
		driftExtra:    DefaultDriftExtra,
		logger:        slog.Default(),
		opTimeout:     5 * time.Second,
	}
}

// defaultBackOff is the longest pause between attempts while waiting for a
// held name. A waiter is woken by the release message first (see the
// package documentation, "Waiting"); the backoff only bounds what a lost
// message costs, so it can be long, and grows so that many waiters do not
// hammer the server. Every step is also capped by the holder's remaining
// TTL, which bounds what a holder that died costs.
func defaultBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.RandomizationFactor = 0.5
	b.Multiplier = 2
	b.MaxInterval = time.Second
	b.MaxElapsedTime = 0 // the caller's context bounds the wait
	b.Reset()
	return b
}

// drift is the margin between a TTL and the local deadline (S2).
func (c *config) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*c.driftFactor) + c.driftExtra
}

// renewInterval is the interval a lease with this configuration renews at.
func (a *acquireConfig) renewInterval() time.Duration {
	if a.interval > 0 {
		return a.interval
	}
	return a.ttl / 3
}

// check validates the timing of one lease: TTL, renewal interval and the
// drift margin must leave the renewal time to happen before the deadline.
func (c *config) check(a *acquireConfig) error {
	if a.ttl < MinTTL {
		return fmt.Errorf("%w: TTL %v is below the minimum %v", ErrInvalidOption, a.ttl, MinTTL)
	}
	iv := a.renewInterval()
	if iv <= 0 || iv >= a.ttl/2 {
		return fmt.Errorf("%w: renewal interval %v must be above 0 and below half the TTL %v", ErrInvalidOption, iv, a.ttl)
	}
	if d := c.drift(a.ttl); d >= a.ttl-iv {
		return fmt.Errorf("%w: drift %v leaves no time to renew a %v TTL every %v", ErrInvalidOption, d, a.ttl, iv)
	}
	return nil
}

// ttlOption is both an Option and an AcquireOption.
type ttlOption time.Duration

func (o ttlOption) applyManager(c *config) error { return o.applyAcquire(&c.acquireConfig) }
func (o ttlOption) applyAcquire(a *acquireConfig) error {
	if time.Duration(o) <= 0 {
		return fmt.Errorf("%w: TTL must be positive, got %v", ErrInvalidOption, time.Duration(o))
	}
	a.ttl = time.Duration(o)
	return nil
}

// WithTTL sets how long a lease lives on the server without renewal
// (default 30s, at least MinTTL). Redis counts whole milliseconds: a TTL
// with a finer part is sent rounded up, so the server never keeps the
// lease for less than the local deadline counts on. As an AcquireOption
// it overrides the manager's TTL for one lease.
func WithTTL(ttl time.Duration) CommonOption {
	return ttlOption(ttl)
}

type intervalOption time.Duration

func (o intervalOption) applyManager(c *config) error { return o.applyAcquire(&c.acquireConfig) }
func (o intervalOption) applyAcquire(a *acquireConfig) error {
	if time.Duration(o) <= 0 {
		return fmt.Errorf("%w: renewal interval must be positive, got %v", ErrInvalidOption, time.Duration(o))
	}
	a.interval = time.Duration(o)
	return nil
}

// WithRenewInterval sets how often the watchdog renews a lease (default a
// third of the TTL; it must be below half the TTL, so that one failed
// renewal still leaves time for another). As an AcquireOption it overrides
// the manager's interval for one lease.
func WithRenewInterval(d time.Duration) CommonOption {
	return intervalOption(d)
}

type backOffOption func() backoff.BackOff

func (o backOffOption) applyManager(c *config) error { return o.applyAcquire(&c.acquireConfig) }
func (o backOffOption) applyAcquire(a *acquireConfig) error {
	if o == nil {
		return fmt.Errorf("%w: nil backoff factory", ErrInvalidOption)
	}
	a.newBackOff = o
	return nil
}

// WithBackOff sets the pauses between attempts while Acquire waits for a
// held name. newBackOff is called once per Acquire for a fresh policy; each
// pause is also capped by the holder's remaining TTL. When the policy
// returns backoff.Stop, Acquire gives up with ErrNotAcquired. As an
// AcquireOption it overrides the manager's policy for one Acquire.
func WithBackOff(newBackOff func() backoff.BackOff) CommonOption {
	return backOffOption(newBackOff)
}

type autoRenewOption bool

func (o autoRenewOption) applyAcquire(a *acquireConfig) error {
	a.noRenew = !bool(o)
	return nil
}

// WithAutoRenew(false) turns the watchdog's renewal off for one lease: it
// then lives for its TTL unless extended with Lease.Extend, and its context
// is still cancelled at its local deadline.
func WithAutoRenew(on bool) AcquireOption { return autoRenewOption(on) }

// MaxMetadataLen bounds WithMetadata's metadata: it travels in every
// renewal, release and marker key of the lease.
const MaxMetadataLen = 256

type metadataOption string

func (o metadataOption) applyAcquire(a *acquireConfig) error {
	if err := CheckMetadata(string(o)); err != nil {
		return fmt.Errorf("%w: metadata: %v", ErrInvalidOption, err)
	}
	a.metadata = string(o)
	return nil
}

// WithMetadata attaches metadata to one acquisition (for example a job id
// or a URL to its logs): operators see it in tenure status, code reads it
// with Lease.Metadata, and package inspect with Holding.Metadata. It is
// stored in the lease's value on the server, after its token and holder
// identity (MetadataOf reads it back), so it costs no extra key or round
// trip, but it travels in every renewal: at most MaxMetadataLen bytes of
// printable UTF-8, without '{' or '}'. Not a secret: whoever can read the
// key reads it. A permit of package semaphore carries it the same way.
func WithMetadata(metadata string) AcquireOption { return metadataOption(metadata) }

// CheckMetadata returns why WithMetadata would refuse s, or nil: for tools
// that take metadata from a user before they acquire.
func CheckMetadata(s string) error {
	switch {
	case len(s) > MaxMetadataLen:
		return fmt.Errorf("longer than %d bytes", MaxMetadataLen)
	case !utf8.ValidString(s):
		return errors.New("not valid UTF-8")
	case strings.ContainsAny(s, "{}"):
		return errors.New("contains '{' or '}'")
	case strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return errors.New("not printable")
	}
	return nil
}

type fairOption bool

func (o fairOption) applyManager(c *config) error { return o.applyAcquire(&c.acquireConfig) }
func (o fairOption) applyAcquire(a *acquireConfig) error {
	a.fair = bool(o)
	return nil
}

// WithFair(true) makes Acquire (and Do) wait its turn: waiters on one name
// are granted it in the order they first asked, across processes, through
// a queue kept in Redis (P{N}:queue). A waiter that stops asking (its process
// died) is dropped from the queue after DefaultQueueTimeout. Fair mode is off
// by default: a barging waiter costs fewer round trips, and whichever waiter
// asks first after a release wins. Barging acquires (and TryAcquire) still
// wait behind fair waiters that are queued, so fairness holds whoever asks.
// As a CommonOption it sets the manager's default.
func WithFair(on bool) CommonOption { return fairOption(on) }

// resizeOption is semaphore.WithResize, made here (internal/bridge) since
// only lease can make an AcquireOption.
type resizeOption bool

func (o resizeOption) applyAcquire(a *acquireConfig) error {
	a.resize = bool(o)
	return nil
}

// countOption is semaphore.WithCount, made here as resizeOption is.
type countOption int

func (o countOption) applyAcquire(a *acquireConfig) error {
	if o < 1 {
		return fmt.Errorf("%w: a count of %d permits: at least 1", ErrInvalidOption, int(o))
	}
	a.count = int(o)
	return nil
}

// permitCount settles how many permits a request takes at once: the k of
// AcquireN (in a.permits, 0 when not given) or WithCount's, which must
// agree when both are given, from 1 to the semaphore's n; a.permits is
// then k, or 0 for one permit (one member, as it always was).
func (a *acquireConfig) permitCount() error {
	k := a.permits
	switch {
	case a.count > 0 && a.limit == 0:
		return fmt.Errorf("%w: a count is for a semaphore's permits (package semaphore)", ErrInvalidOption)
	case a.count > 0 && k > 0 && k != a.count:
		return fmt.Errorf("%w: %d permits at once, and a count of %d: give one", ErrInvalidOption, k, a.count)
	case a.count > 0:
		k = a.count
	}
	if a.limit == 0 {
		return nil
	}
	if k == 0 {
		k = 1
	}
	if k > a.limit {
		return fmt.Errorf("%w: %d of %d permits at once: from 1 to n", ErrInvalidOption, k, a.limit)
	}
	if broken { // tenure_broken builds only: broken_on.go
		k = breakK(k)
	}
	if k == 1 {
		k = 0
	}
	a.permits = k
	return nil
}

type managerOption func(*config) error

func (o managerOption) applyManager(c *config) error { return o(c) }

// WithKeyPrefix sets the prefix of every Redis key and channel the manager
// uses (default "tenure:"). Managers that must exclude each other use the
// same prefix. It may not contain '{' or '}', which would break the Cluster
// hash tag that keeps a name's keys in one slot.
func WithKeyPrefix(prefix string) Option {
	return managerOption(func(c *config) error {
		if err := keys.CheckPrefix(prefix); err != nil {
			return fmt.Errorf("%w: key prefix %v", ErrInvalidOption, err)
		}
		c.prefix = prefix
		return nil
	})
}

// WithDrift sets the margin subtracted from every TTL to get a lease's local
// deadline: ttl*factor + extra (default 0.01 and 2ms, Redlock's clock drift
// factor). Raise it when the holder's clock or scheduler may run late
// against the Redis host's; factor must be in [0, 1) and extra not negative.
func WithDrift(factor float64, extra time.Duration) Option {
	return managerOption(func(c *config) error {
		if !(factor >= 0 && factor < 1) {
			return fmt.Errorf("%w: drift factor %v must be in [0, 1)", ErrInvalidOption, factor)
		}
		if extra < 0 {
			return fmt.Errorf("%w: drift %v must not be negative", ErrInvalidOption, extra)
		}
		c.driftFactor, c.driftExtra = factor, extra
		return nil
	})
}

// WithLogger sets where the manager logs (default slog.Default()): a lease
// lost is a warning; nothing is logged per renewal above Debug.
func WithLogger(l *slog.Logger) Option {
	return managerOption(func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		c.logger = l
		return nil
	})
}

// WithOpTimeout bounds the round trips the manager makes on its own, with no
// caller's context to bound them: releases on Close, after Do, and the
// clean-up after an Acquire whose outcome is unknown (default 5s).
func WithOpTimeout(d time.Duration) Option {
	return managerOption(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: op timeout must be positive, got %v", ErrInvalidOption, d)
		}
		c.opTimeout = d
		return nil
	})
}

// WithReleaseMemory sets how long the server remembers each release of the
// manager's leases and permits (default 10s, never longer than the lease's
// TTL): go-redis sends a command again when its reply is lost to a broken
// connection or a timeout (up to its MaxRetries), and a release's copy is
// then answered as the first was, from a marker key the release leaves,
// P{N}:retired:<token>.
//
// 0 gives that promise up for a cheaper release: no marker is written (one
// write fewer a cycle; bench/results/cost50.md measures it). A copy resent
// after the first freed the name finds it gone, so Release returns an error
// matching ErrNotHeld and ErrLost, and the manager logs a loss, although
// the lease was released and nothing overlapped. Choose 0 only where that
// error and that log line after a lost reply do not matter, or where the
// client never resends (go-redis's MaxRetries -1). Reentrant locks always
// remember their releases, whatever this says: an exit applied twice would
// free the name under its owner. d must not be negative.
func WithReleaseMemory(d time.Duration) Option {
	return managerOption(func(c *config) error {
		switch {
		case d < 0:
			return fmt.Errorf("%w: release memory must not be negative, got %v", ErrInvalidOption, d)
		case d == 0:
			c.memory = backend.Forget
		default:
			c.memory = d
		}
		return nil
	})
}

// maxHolder bounds a holder identity: it travels in every renewal.
const maxHolder = 128

// WithHolder names who holds the manager's leases (for example host name
// and pid, the CLI's default) so that tools can tell an operator: the
// identity follows the random part of every lease's token, after a '.'
// ("<32 hex digits>.<identity>"), which stores it in the lease's value at
// no extra round trip. Renewal and release still compare the whole token
// exactly. Lease.Holder returns it, and HolderOf reads it from a stored
// value. The identity must be 1 to 128 bytes of printable UTF-8.
func WithHolder(identity string) Option {
	return managerOption(func(c *config) error {
		if err := checkHolder(identity); err != nil {
			return fmt.Errorf("%w: holder %q: %v", ErrInvalidOption, identity, err)
		}
		c.holder = identity
		return nil
	})
}

func checkHolder(id string) error {
	switch {
	case id == "":
		return errors.New("empty")
	case len(id) > maxHolder:
		return fmt.Errorf("longer than %d bytes", maxHolder)
	case !utf8.ValidString(id):
		return errors.New("not valid UTF-8")
	case strings.ContainsAny(id, "{}"):
		// The token ends in the identity, and a release marker's key ends
		// in the token: a brace there would make a marker's key another
		// name's key (P{a}:retired:<hex>.x} is the lease key of the name
		// "a}:retired:<hex>.x").
		return errors.New("contains a brace")
	}
	for _, r := range id {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("unprintable character %U", r)
		}
	}
	return nil
}

// WithHooks sets functions the manager calls as its leases are acquired,
// renewed, extended, released and lost: package tracing builds them for
// OpenTelemetry. A second WithHooks replaces the first.
func WithHooks(h Hooks) Option {
	return managerOption(func(c *config) error {
		c.hooks = h
		return nil
	})
}

// checkName rejects names that cannot make a sound key, before any round
// trip.
func checkName(name string) error {
	if err := keys.CheckName(name); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidName, err)
	}
	return nil
}
