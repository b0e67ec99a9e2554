package redisson

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/watchdog"
)

var (
	//go:embed scripts/publish.lua
	publishSrc string
	//go:embed scripts/lock.lua
	lockSrc string
	//go:embed scripts/unlock.lua
	unlockSrc string
	//go:embed scripts/force.lua
	forceSrc string
	//go:embed scripts/read_lock.lua
	readLockSrc string
	//go:embed scripts/read_unlock.lua
	readUnlockSrc string
	//go:embed scripts/write_lock.lua
	writeLockSrc string
	//go:embed scripts/write_unlock.lua
	writeUnlockSrc string
	//go:embed scripts/renew.lua
	renewSrc string
	//go:embed scripts/fair_prune.lua
	fairPruneSrc string
	//go:embed scripts/fair_lock.lua
	fairLockSrc string
	//go:embed scripts/fair_unlock.lua
	fairUnlockSrc string
	//go:embed scripts/fair_force.lua
	fairForceSrc string
	//go:embed scripts/fair_leave.lua
	fairLeaveSrc string
	//go:embed scripts/sem_reclaim.lua
	semReclaimSrc string
	//go:embed scripts/sem_acquire.lua
	semAcquireSrc string
	//go:embed scripts/sem_release.lua
	semReleaseSrc string
	//go:embed scripts/sem_set.lua
	semSetSrc string
	//go:embed scripts/sem_add.lua
	semAddSrc string
	//go:embed scripts/sem_available.lua
	semAvailableSrc string
	//go:embed scripts/sem_update.lua
	semUpdateSrc string
	//go:embed scripts/sem_acquired.lua
	semAcquiredSrc string

	// Each runs with EVALSHA, and EVAL when the server does not know it
	// (backend.Script, which works in FIPS 140-only mode).
	lockScript        = backend.NewScript(lockSrc)
	unlockScript      = backend.NewScript(publishSrc + unlockSrc)
	forceScript       = backend.NewScript(publishSrc + forceSrc)
	readLockScript    = backend.NewScript(readLockSrc)
	readUnlockScript  = backend.NewScript(publishSrc + readUnlockSrc)
	writeLockScript   = backend.NewScript(writeLockSrc)
	writeUnlockScript = backend.NewScript(publishSrc + writeUnlockSrc)
	renewScript       = backend.NewScript(renewSrc)
	fairLockScript    = backend.NewScript(fairPruneSrc + fairLockSrc)
	fairUnlockScript  = backend.NewScript(publishSrc + fairPruneSrc + fairUnlockSrc)
	fairForceScript   = backend.NewScript(publishSrc + fairPruneSrc + fairForceSrc)
	fairLeaveScript   = backend.NewScript(publishSrc + fairLeaveSrc)

	// An RPermitExpirableSemaphore's.
	semAcquireScript   = backend.NewScript(publishSrc + semReclaimSrc + semAcquireSrc)
	semReleaseScript   = backend.NewScript(publishSrc + semReleaseSrc)
	semSetScript       = backend.NewScript(publishSrc + semSetSrc)
	semAddScript       = backend.NewScript(publishSrc + semAddSrc)
	semAvailableScript = backend.NewScript(publishSrc + semReclaimSrc + semAvailableSrc)
	semUpdateScript    = backend.NewScript(publishSrc + semReclaimSrc + semUpdateSrc)
	semAcquiredScript  = backend.NewScript(publishSrc + semReclaimSrc + semAcquiredSrc)
)

// MaxNameLen is the longest name accepted, in bytes, prefix included.
const MaxNameLen = lease.MaxNameLen

// An Owner is who holds a Redisson lock: the field <ClientID>:<ThreadID>
// in its hash. A Java owner is a RedissonClient's UUID and a thread's id;
// a Go owner is whatever stable pair the context carries (WithOwner), or a
// fresh one. Never a goroutine id: goroutines come and go, and a lock's
// work may move between them.
type Owner struct {
	ClientID string
	ThreadID int64
}

// Field returns the hash field of o: "<ClientID>:<ThreadID>".
func (o Owner) Field() string { return o.ClientID + ":" + strconv.FormatInt(o.ThreadID, 10) }

type ownerKey struct{}

// WithOwner returns a context carrying o: every lock taken under it (or a
// context derived from it) is o's, and re-enters o's holds. An empty
// ClientID stands for the locking Client's own id.
func WithOwner(ctx context.Context, o Owner) context.Context {
	return context.WithValue(ctx, ownerKey{}, o)
}

// OwnerFrom returns the owner ctx carries, if any.
func OwnerFrom(ctx context.Context) (Owner, bool) {
	o, ok := ctx.Value(ownerKey{}).(Owner)
	return o, ok
}

// A Client takes Redisson locks as one RedissonClient would: one client
// id, one watchdog renewing every lock it holds, one set of waiters'
// subscriptions. It is safe for concurrent use; Close it when done.
type Client struct {
	c        redis.UniversalClient
	cfg      config
	id       string
	publish  string // 'PUBLISH' or 'SPUBLISH'
	wd       *watchdog.Watchdog[item]
	notifier *notifier

	mu     sync.Mutex
	holds  map[holdKey]*hold
	closed bool

	permits permitSet // the RPermitExpirableSemaphore permits it holds

	guards sync.WaitGroup // each hold's listener (guard)

	// stripes serialize the acquisitions of one field (stripe).
	stripes [64]sync.Mutex
}

// stripe returns the mutex that serializes acquisitions of key's field.
func (c *Client) stripe(key holdKey) *sync.Mutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key.raw))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(key.field))
	return &c.stripes[h.Sum32()%uint32(len(c.stripes))]
}

// New returns a Client over c: a *redis.Client for one server (or a
// Sentinel group's primary), a *redis.ClusterClient for a Cluster. c must
// not resend commands (MaxRetries: -1 in its options): go-redis's default
// resends a command whose reply was lost up to 3 times, and a lock script
// run twice counts its entry twice; New refuses such a client with an
// error wrapping lease.ErrInvalidOption.
func New(c redis.UniversalClient, opts ...Option) (*Client, error) {
	if c == nil {
		return nil, invalid("nil redis client")
	}
	if n, resends := resends(c); resends {
		return nil, invalid("the redis client resends a command whose reply was lost (%d retries; go-redis's default is 3): a resent lock script counts an entry twice, and an unlock that was applied is applied again; "+
			"set MaxRetries: -1 in its options (tenure resends an unlock itself, safely, with its latch)", n)
	}
	cfg := defaults()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.clientID == "" {
		cfg.clientID = newUUID()
	}
	cl := &Client{
		c:        c,
		cfg:      cfg,
		id:       cfg.clientID,
		publish:  "PUBLISH",
		notifier: newNotifier(c),
		holds:    map[holdKey]*hold{},
	}
	if _, ok := c.(*redis.ClusterClient); ok && cfg.sharding == ShardedAuto {
		cl.publish = "SPUBLISH"
	}
	cl.wd = watchdog.New[item](renewer{cl}, watchdog.Config{Drift: cfg.drift})
	return cl, nil
}

// resends reports whether c resends a command whose reply was lost, and
// its MaxRetries as go-redis normalized it: a client retries a command
// that failed on the network MaxRetries times, which New makes 3 when
// left 0 and 0 when set to -1. A Cluster client's nodes retry as its
// MaxRetries says (0 there stands for none); the Cluster client itself
// also sends a command again after a network error, up to MaxRedirects
// times, the attempts with which it follows MOVED and ASK: that cannot be
// turned off without losing the redirections, and is not looked at.
func resends(c redis.UniversalClient) (int, bool) {
	var n int
	switch c := c.(type) {
	case *redis.Client:
		n = c.Options().MaxRetries
	case *redis.ClusterClient:
		n = c.Options().MaxRetries
	case *redis.Ring:
		n = c.Options().MaxRetries
	default:
		return 0, false
	}
	return n, n > 0
}

// ID returns the client id, the first half of this Client's fields.
func (c *Client) ID() string { return c.id }

// Close releases every lock the Client holds (each owner's field leaves
// its hash, and waiters are told) and every semaphore permit, cancels
// their contexts with cause lease.ErrClosed, and stops every goroutine the Client started. It does
// not close the redis client.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	holds := make([]*hold, 0, len(c.holds))
	for _, h := range c.holds {
		holds = append(holds, h)
	}
	c.holds = map[holdKey]*hold{}
	c.mu.Unlock()
	c.wd.Close()
	c.notifier.close()
	var errs []error
	for _, h := range holds {
		h.mu.Lock()
		n := h.count
		h.count = 0
		h.mu.Unlock()
		if n > 0 && h.ctx.Err() == nil {
			ctx, cancel := context.WithTimeout(context.Background(), c.cfg.opTimeout)
			for range n {
				if _, err := c.unlockOnce(ctx, h.key, newUUID()); err != nil {
					errs = append(errs, err)
					break
				}
			}
			cancel()
		}
		h.cancel(lease.ErrClosed)
	}
	errs = append(errs, c.permits.close(c.cfg.opTimeout)...)
	c.guards.Wait()
	return errors.Join(errs...)
}

// kind is what a Lock is in Redisson's terms.
type kind uint8

const (
	plainLock  kind = iota // RLock
	fencedLock             // RFencedLock
	readLock               // RReadWriteLock.readLock()
	writeLock              // RReadWriteLock.writeLock()
	fairLock               // RFairLock
)

func (k kind) String() string {
	return [...]string{"lock", "fenced lock", "read lock", "write lock", "fair lock"}[k]
}

// holdKey names one hold: an owner's field in one lock's hash.
type holdKey struct {
	kind  kind
	raw   string // the mapped name, the hash's key
	field string
}

// item is what the watchdog renews: a field of a hash, and for a reader
// the prefix of its timeout keys.
type item struct {
	key, field, timeouts string
}

// channel is where the lock of k's kind is released, or forced.
func (k holdKey) channel() string {
	if k.kind == readLock || k.kind == writeLock {
		return rwChannel(k.raw)
	}
	return lockChannel(k.raw)
}

func (k holdKey) item() item {
	it := item{key: k.raw, field: k.field}
	if k.kind == readLock {
		it.timeouts = timeoutPrefix(k.raw, k.field)
	}
	return it
}

// Redisson's key names (RedissonObject.prefixName and suffixName): a name
// that holds a '{' is its own hash tag, any other gets braces, so that
// every key and channel of a lock lives in the slot of its hash.
func prefixName(prefix, raw string) string {
	if strings.Contains(raw, "{") {
		return prefix + ":" + raw
	}
	return prefix + ":{" + raw + "}"
}

func suffixName(raw, suffix string) string {
	if strings.Contains(raw, "{") {
		return raw + ":" + suffix
	}
	return "{" + raw + "}:" + suffix
}

func lockChannel(raw string) string { return prefixName("redisson_lock__channel", raw) }
func rwChannel(raw string) string   { return prefixName("redisson_rwlock", raw) }
func tokenKey(raw string) string    { return prefixName("redisson_lock_token", raw) }

// An RFairLock's queue of waiting fields and their timeouts. Redisson
// 3.52 names them after the mapped name, as here; before 3.52 after the
// name as given, which differs only under a NameMapper (WithNamePrefix).
func queueKey(raw string) string   { return prefixName("redisson_lock_queue", raw) }
func timeoutKey(raw string) string { return prefixName("redisson_lock_timeout", raw) }
func latchKey(raw, request string) string {
	return prefixName("redisson_unlock_latch", raw) + ":" + request
}

// timeoutPrefix is a reader's: {NAME}:<field>:rwlock_timeout, each read
// entry i having the key timeoutPrefix:i.
func timeoutPrefix(raw, field string) string { return suffixName(raw, field) + ":rwlock_timeout" }

// timeoutsOf is what precedes ":<field>" in a reader's timeout prefix: the
// prefix of every reader's timeout keys ({NAME}), as Redisson's
// RedissonReadLock.getKeyPrefix cuts it.
func timeoutsOf(raw, field string) string {
	before, _, _ := strings.Cut(timeoutPrefix(raw, field), ":"+field)
	return before
}

func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", lease.ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %d bytes, over %d", lease.ErrInvalidName, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %q is not valid UTF-8", lease.ErrInvalidName, name)
	}
	return nil
}

// renewer renews the Client's holds for its watchdog, one pipelined round
// trip per batch (per node on a Cluster).
type renewer struct{ c *Client }

func (r renewer) Renew(ctx context.Context, batch []watchdog.Renewal[item], errs []error) {
	ms := func(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }
	run := func(eval bool, which []int) []*redis.Cmd {
		cmds := make([]*redis.Cmd, len(batch))
		_, _ = r.c.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range which {
				it := batch[i].Item
				keys := []string{it.key}
				if it.timeouts != "" {
					keys = append(keys, it.timeouts)
				}
				if eval {
					cmds[i] = renewScript.Eval(ctx, p, keys, ms(batch[i].TTL), it.field)
				} else {
					cmds[i] = renewScript.EvalSha(ctx, p, keys, ms(batch[i].TTL), it.field)
				}
			}
			return nil
		})
		return cmds
	}
	all := make([]int, len(batch))
	for i := range all {
		all[i] = i
	}
	if len(batch) > 0 {
		renewScript.Load(ctx, r.c.c, batch[0].Item.key) // EVALSHA in FIPS mode too
	}
	cmds := run(false, all)
	var again []int
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		for i, cmd := range run(true, again) {
			if cmd != nil {
				cmds[i] = cmd
			}
		}
	}
	for i, cmd := range cmds {
		n, err := cmd.Int64()
		switch {
		case err != nil:
			errs[i] = err
		case n == 0:
			errs[i] = fieldGone{batch[i].Item.field}
		}
	}
}

// fieldGone is a renewal's answer that the hold's owner field is gone
// from its hash: the watchdog's ErrNotHeld (errors.Is), in words that do
// not repeat what the loss's cause says before it (the lock, its name,
// "watchdog").
type fieldGone struct{ field string }

func (e fieldGone) Error() string {
	return fmt.Sprintf("its owner field %q is gone from the hash", e.field)
}
func (e fieldGone) Is(target error) bool { return target == watchdog.ErrNotHeld }

// newUUID returns a random (version 4) UUID, as Java's UUID.randomUUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// newThreadID returns a fresh thread id for an owner a context did not
// name: positive, as Java's are, and random, so that it names this lock's
// work alone.
func newThreadID() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:])>>1) | 1
}
