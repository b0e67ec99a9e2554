package election

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/bridge"
	// Imported under another name: keys is this package's set of one
	// name's keys.
	layout "github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/lease"
)

// inside reaches the client a Manager was made with.
var inside = bridge.Get[*lease.Manager, *lease.Lease, lease.AcquireOption]()

// Defaults.
const (
	// DefaultTTL is the TTL of the leadership lease: a leader that dies
	// without letting go is replaced within it. It is a lease's
	// (lease.DefaultTTL), which `tenure elect` uses too, so that a leader
	// elected by the library and one by the command fail over alike. A
	// shorter Config.TTL replaces a dead leader sooner (client-go's leader
	// election takes 15 s) at the cost of more renewals and less room for
	// a slow Redis or a paused process before a leader steps down.
	DefaultTTL = lease.DefaultTTL
	// DefaultRetryPeriod is the pause after a campaign attempt that failed
	// on a Redis error, and the longest an observer goes without looking.
	DefaultRetryPeriod = time.Second
	// MaxIdentityLen is the longest identity accepted, in bytes.
	MaxIdentityLen = 1024
)

// Errors for errors.Is.
var (
	// ErrInvalidConfig: a Config or Callbacks value is missing or out of
	// range. The error says which.
	ErrInvalidConfig = errors.New("election: invalid config")
	// ErrNoLeader: Leader found no current leader.
	ErrNoLeader = errors.New("election: no leader")
	// ErrResigned is the cause of a leading context ended by Resign.
	ErrResigned = errors.New("election: resigned")
	// ErrRunning: Run was called while another Run of the same Election
	// was campaigning.
	ErrRunning = errors.New("election: already running")
	// ErrStuck: Check found a term that should have ended and whose
	// OnStartedLeading has not returned.
	ErrStuck = errors.New("election: leader stuck past its lease")
)

// Config configures an Election. Name is required, and a Manager or a
// Client (or both); a Manager is required by Run (an Election without one
// can only observe: Leader and Observe).
type Config struct {
	// Manager holds the leadership lease; its watchdog renews it.
	Manager *lease.Manager
	// Client is where Leader and Observe read the leader record, and where
	// Observe subscribes to the change messages. Leave it nil to use the
	// client the Manager was made with (lease.New's); it is required
	// without a Manager, and with a Manager that has no single client of
	// its own (lease.NewQuorum's, or leasetest's, which keeps no record
	// anyway). When both are set, Client is used as given: it must reach
	// the Redis deployment the Manager's client does.
	Client redis.UniversalClient
	// KeyPrefix is the Manager's key prefix (lease.WithKeyPrefix). Empty
	// means the Manager's, or lease.DefaultKeyPrefix without a Manager; a
	// prefix that differs from the Manager's is an error.
	KeyPrefix string
	// Name is what the candidates campaign for: the lease's name.
	Name string
	// Identity names this candidate in the leader record (a host name, a
	// pod name): at most MaxIdentityLen bytes of UTF-8. Unlike the lease's
	// token it is public, and need not be unique, but observers cannot
	// tell apart candidates that share one. Empty means DefaultIdentity():
	// host/pid, as "tenure elect" names its candidates.
	Identity string
	// TTL is the leadership lease's TTL (default DefaultTTL): a leader
	// that dies is replaced within it, and one cut off from Redis stops
	// leading within it. The Manager renews the lease every TTL/3 unless
	// its renewal interval says otherwise.
	TTL time.Duration
	// RetryPeriod is the pause after a campaign attempt that failed on a
	// Redis error, and the longest an observer goes without reading the
	// record (default DefaultRetryPeriod).
	RetryPeriod time.Duration
	// ReleaseTimeout bounds the round trips that end a term: the leader
	// record's deletion and the lease's release, which a paused or
	// unreachable Redis never answers (default min(5s, TTL): past the TTL
	// the lease has expired anyway). The Manager's hooks (ReleaseDone) see
	// the release's outcome.
	ReleaseTimeout time.Duration
}

// Callbacks are what Run calls as leadership comes and goes.
type Callbacks struct {
	// OnStartedLeading is called, in a goroutine of its own, when this
	// candidate becomes leader, with the leading context: cancelled when
	// leadership ends, with cause lease.ErrLost (the lease was lost),
	// ErrResigned, lease.ErrClosed, or the cause of Run's context. Leading
	// returns this term's Record from it. Leadership does not end when it
	// returns, but Run waits for it to return before the lease is
	// released: return promptly once ctx is done. Required.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading is called when a term of this candidate has ended:
	// OnStartedLeading has returned and the lease was released. Optional.
	OnStoppedLeading func()
	// OnNewLeader is called with the identity of every new leader that is
	// observed while Run runs, this candidate included, once per term
	// (a re-elected leader is reported again). It is called from one
	// goroutine, in order; a slow callback makes it skip terms, not
	// queue them. Optional.
	OnNewLeader func(identity string)
}

// A Record is a leadership term: who leads and its fencing token. The zero
// Record means no leader.
type Record struct {
	// Name is the name campaigned for.
	Name string `json:"name"`
	// Identity is the leader's Config.Identity.
	Identity string `json:"identity"`
	// Fence is the term: the fencing token of the leader's lease, greater
	// than every earlier term's.
	Fence int64 `json:"fence"`
}

// An Election campaigns for a name on behalf of one candidate, and reads
// who leads it. It is safe for concurrent use; one Run at a time.
type Election struct {
	cfg    Config
	keys   keys
	ttl    time.Duration
	period time.Duration

	// classic: the server refused sharded pub/sub (a Cluster of Redis
	// older than 7.0), so messages are classic there too (notify.go).
	classic atomic.Bool

	mu      sync.Mutex
	running bool
	resign  chan struct{} // closed by Resign: the running campaign stops
	term    *term         // the current term, if leading
}

// term is one leadership of this candidate.
type term struct {
	rec      Record
	lease    *lease.Lease
	ctx      context.Context // the leading context
	cancel   context.CancelCauseFunc
	released chan struct{} // closed when the term's clean-up is done
	began    atomic.Bool   // OnStartedLeading was called
	endedAt  atomic.Int64  // when the leading context ended, Unix ns; 0 before
}

// keys are the Redis keys and channels of one name.
type keys struct {
	lease, fence, record string
	changed, released    string
	prefix               string
}

func newKeys(prefix, name string) keys {
	l := layout.Layout{Prefix: prefix}
	return keys{
		lease:    l.Lease(name),
		fence:    l.Fence(name),
		record:   l.Leader(name),
		changed:  l.LeaderChanged(name),
		released: l.Channel(name),
		prefix:   prefix,
	}
}

// New validates cfg and returns an Election. It makes no round trip.
func New(cfg Config) (*Election, error) {
	if cfg.Client == nil && cfg.Manager != nil {
		cfg.Client = inside.Client(cfg.Manager)
	}
	if cfg.Client == nil {
		if cfg.Manager != nil {
			return nil, fmt.Errorf("%w: Client is nil, and the Manager has no Redis client of its own (made by lease.NewQuorum or leasetest): give Client", ErrInvalidConfig)
		}
		return nil, fmt.Errorf("%w: Client is nil, and there is no Manager to take it from", ErrInvalidConfig)
	}
	if err := checkName(cfg.Name); err != nil {
		return nil, err
	}
	if cfg.Identity == "" {
		cfg.Identity = DefaultIdentity()
	}
	if len(cfg.Identity) > MaxIdentityLen {
		return nil, fmt.Errorf("%w: Identity is %d bytes, over the %d-byte limit", ErrInvalidConfig, len(cfg.Identity), MaxIdentityLen)
	}
	if !utf8.ValidString(cfg.Identity) {
		return nil, fmt.Errorf("%w: Identity is not valid UTF-8", ErrInvalidConfig)
	}
	if err := layout.CheckPrefix(cfg.KeyPrefix); err != nil {
		return nil, fmt.Errorf("%w: KeyPrefix %v", ErrInvalidConfig, err)
	}
	if cfg.TTL < 0 || (cfg.TTL > 0 && cfg.TTL < lease.MinTTL) {
		return nil, fmt.Errorf("%w: TTL %v is below the minimum %v", ErrInvalidConfig, cfg.TTL, lease.MinTTL)
	}
	if cfg.RetryPeriod < 0 {
		return nil, fmt.Errorf("%w: RetryPeriod %v is negative", ErrInvalidConfig, cfg.RetryPeriod)
	}
	if cfg.ReleaseTimeout < 0 {
		return nil, fmt.Errorf("%w: ReleaseTimeout %v is negative", ErrInvalidConfig, cfg.ReleaseTimeout)
	}
	prefix := cfg.KeyPrefix
	if cfg.Manager != nil {
		if prefix != "" && prefix != cfg.Manager.KeyPrefix() {
			return nil, fmt.Errorf("%w: KeyPrefix %q differs from the Manager's %q", ErrInvalidConfig, prefix, cfg.Manager.KeyPrefix())
		}
		prefix = cfg.Manager.KeyPrefix()
	}
	if prefix == "" {
		prefix = lease.DefaultKeyPrefix
	}
	e := &Election{cfg: cfg, keys: newKeys(prefix, cfg.Name), ttl: cfg.TTL, period: cfg.RetryPeriod}
	if e.ttl == 0 {
		e.ttl = DefaultTTL
	}
	if e.period == 0 {
		e.period = DefaultRetryPeriod
	}
	return e, nil
}

// checkName applies lease's rules for names, so that a bad one is an error
// from New rather than from the first campaign.
func checkName(name string) error {
	if err := layout.CheckName(name); err != nil {
		return fmt.Errorf("%w: Name: %v", ErrInvalidConfig, err)
	}
	return nil
}

// Name returns the name campaigned for.
func (e *Election) Name() string { return e.cfg.Name }

// DefaultIdentity is the identity of a candidate whose Config.Identity is
// empty: the host name and the process id, "host/pid", as "tenure elect"
// uses by default (and "localhost/pid" when the host name is unknown).
func DefaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// Identity returns this candidate's identity.
func (e *Election) Identity() string { return e.cfg.Identity }

type leadingKey struct{}

type leadingValue struct {
	e   *Election
	rec Record
}

// Leading returns the Record of the term whose leading context ctx is (or
// derives from), and false for any other context.
func Leading(ctx context.Context) (Record, bool) {
	v, ok := ctx.Value(leadingKey{}).(leadingValue)
	return v.rec, ok
}

// Run campaigns for the name until ctx ends or Resign is called, leading
// whenever it wins (see the package documentation for the order of events).
// It returns nil after Resign, the cause of ctx when ctx ended, and an
// error wrapping lease.ErrClosed when the Manager was closed. A Redis error
// while campaigning is retried after RetryPeriod, except the server
// refusing the user (NOPERM, a command a script called refused,
// WRONGPASS, NOAUTH: see docs/security.md), which no retry mends: Run
// returns it, and errors.As finds go-redis's redis.Error in it. A lost
// leadership is followed by a new campaign.
func (e *Election) Run(ctx context.Context, cb Callbacks) error {
	if err := e.checkRun(cb); err != nil {
		return err
	}
	resign, err := e.startRunning()
	if err != nil {
		return err
	}
	defer e.stopRunning()
	if cb.OnNewLeader != nil {
		stopReporting := e.reportLeaders(ctx, cb.OnNewLeader)
		defer stopReporting()
	}

	// The campaign's context ends with ctx or at Resign.
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-resign:
			cancel(ErrResigned)
		case <-cctx.Done():
		}
	}()
	return e.campaign(ctx, cctx, cb)
}

// checkRun rejects, before anything starts, an Election that can only
// observe and Callbacks without OnStartedLeading.
func (e *Election) checkRun(cb Callbacks) error {
	if e.cfg.Manager == nil {
		return fmt.Errorf("%w: Run needs a Manager", ErrInvalidConfig)
	}
	if cb.OnStartedLeading == nil {
		return fmt.Errorf("%w: OnStartedLeading is nil", ErrInvalidConfig)
	}
	return nil
}

// startRunning marks the Election as running, or returns ErrRunning if a
// Run already is. It returns the channel Resign closes for this Run: a
// fresh one each time, so that a Resign of an earlier Run stops no later
// one.
func (e *Election) startRunning() (resign <-chan struct{}, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running {
		return nil, ErrRunning
	}
	e.running = true
	ch := make(chan struct{})
	e.resign = ch
	return ch, nil
}

// stopRunning undoes startRunning: Run may be called again, and Resign
// does nothing until it is.
func (e *Election) stopRunning() {
	e.mu.Lock()
	e.running = false
	e.mu.Unlock()
}

// reportLeaders calls onNewLeader once per term that Observe sees, until
// the returned function is called; that function returns once the last
// call has.
func (e *Election) reportLeaders(ctx context.Context, onNewLeader func(identity string)) (stop func()) {
	octx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		var last int64
		for rec := range e.Observe(octx) {
			if rec.Fence != 0 && rec.Fence != last {
				last = rec.Fence
				onNewLeader(rec.Identity)
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// campaign acquires the lease and leads, again and again, until cctx ends
// or an error that no retry mends; it returns what Run returns.
func (e *Election) campaign(ctx, cctx context.Context, cb Callbacks) error {
	for {
		if err := e.stop(ctx, cctx); err != nil || cctx.Err() != nil {
			return err
		}
		l, err := e.cfg.Manager.Acquire(cctx, e.cfg.Name, lease.WithTTL(e.ttl))
		if err != nil {
			if errors.Is(err, lease.ErrClosed) {
				return err
			}
			if cctx.Err() != nil {
				return e.stop(ctx, cctx)
			}
			if errors.Is(err, lease.ErrInvalidOption) || errors.Is(err, lease.ErrInvalidName) || refused(err) {
				return err
			}
			if !sleep(cctx, e.period) {
				return e.stop(ctx, cctx)
			}
			continue
		}
		if err := e.lead(cctx, l, cb); err != nil {
			if errors.Is(err, lease.ErrClosed) || refused(err) {
				return err
			}
			if !sleep(cctx, e.period) {
				return e.stop(ctx, cctx)
			}
		}
	}
}

// refused reports whether err is the server refusing the user rather than
// failing: a permission error (NOPERM, or a command a script called
// refused) or an authentication error (WRONGPASS, NOAUTH).
func refused(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	for _, p := range []string{"NOPERM", "WRONGPASS", "NOAUTH"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return strings.Contains(msg, "The user executing the script can't")
}

// stop is what Run returns once its campaign context cctx has ended: nil
// after Resign, else ctx's cause.
func (e *Election) stop(ctx, cctx context.Context) error {
	if cctx.Err() == nil {
		return nil
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil // resigned
}

// lead is one term: it writes the record, runs OnStartedLeading until the
// leading context ends, then cleans up. It returns an error when the term
// could not begin (the record could not be written) or the manager closed.
func (e *Election) lead(cctx context.Context, l *lease.Lease, cb Callbacks) error {
	rec := Record{Name: e.cfg.Name, Identity: e.cfg.Identity, Fence: l.Fence()}
	lctx, cancel := context.WithCancelCause(context.WithValue(l.Context(), leadingKey{}, leadingValue{e, rec}))
	stopAfter := context.AfterFunc(cctx, func() { cancel(context.Cause(cctx)) })
	defer stopAfter()
	t := &term{rec: rec, lease: l, ctx: lctx, cancel: cancel, released: make(chan struct{})}
	stopEnded := context.AfterFunc(lctx, func() { t.endedAt.Store(time.Now().UnixNano()) })
	defer stopEnded()
	defer close(t.released)
	e.mu.Lock()
	e.term = t // from now on Resign waits for the term's end
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.term = nil
		e.mu.Unlock()
	}()

	// Write the record while the lease holds the name, and tell observers.
	if err := e.writeRecord(lctx, l, rec); err != nil {
		cancel(err)
		e.release(l, false)
		if cause := context.Cause(lctx); errors.Is(cause, lease.ErrClosed) {
			return cause
		}
		return fmt.Errorf("election: %q: writing the leader record: %w", e.cfg.Name, err)
	}

	if lctx.Err() != nil {
		// Ended (resigned, lost) while the record was written: this term
		// never began.
		e.release(l, true)
		return nil
	}
	done := make(chan struct{})
	t.began.Store(true)
	go func() {
		defer close(done)
		cb.OnStartedLeading(lctx)
	}()
	e.keepRecord(lctx, l)
	<-done
	e.release(l, true)
	if cb.OnStoppedLeading != nil {
		cb.OnStoppedLeading()
	}
	if cause := context.Cause(lctx); errors.Is(cause, lease.ErrClosed) {
		return cause
	}
	return nil
}

// keepRecord refreshes the leader record's TTL until the term ends. The
// record expires with the lease's TTL, so that a leader whose process dies
// or whose manager is closed under it leaves no key behind for good (S6);
// while the term lasts it is refreshed as often as the lease is renewed,
// and only while the lease holds the name, so a successor's record is
// never touched. A refresh that fails is tried again at the next tick: the
// lease itself ends before the record could expire unless its renewals
// succeed too.
func (e *Election) keepRecord(lctx context.Context, l *lease.Lease) {
	tick := time.NewTicker(e.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-lctx.Done():
			return
		case <-tick.C:
			// No later than the lease's local deadline, past which a
			// refresh is of no use: one still waiting for its reply then
			// would hold up the term's end, since a client with
			// ContextTimeoutEnabled heeds the deadline, not lctx's
			// cancellation.
			until := time.Now().Add(e.opTimeout())
			if dl := l.Deadline(); dl.Before(until) {
				until = dl
			}
			ctx, cancel := context.WithDeadline(lctx, until)
			_, _ = l.Exec(ctx, func(p redis.Pipeliner) error {
				p.PExpire(ctx, e.keys.record, e.ttl)
				return nil
			})
			cancel()
		}
	}
}

// release ends a term on the server: the record goes (while the lease still
// holds the name, so a successor's record is never touched), then the
// lease, whose release wakes the waiting candidates. A lost lease's release
// is a courtesy: the server lets the name go by the lease's deadline, or
// already has (it was deleted or taken over). So it waits no longer than
// that deadline: OnStoppedLeading, and whatever a cut-off leader does after
// its term, would otherwise wait out ReleaseTimeout on an unreachable
// Redis (TestLostTermReleaseWaitsNoLongerThanItsDeadline).
func (e *Election) release(l *lease.Lease, wrote bool) {
	timeout := e.releaseTimeout()
	if l.Err() != nil {
		timeout = min(timeout, time.Until(l.Deadline()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if wrote && l.Err() == nil {
		_, _ = l.Exec(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, e.keys.record)
			return nil
		})
	}
	_ = l.Release(ctx)
}

// releaseTimeout bounds the round trips that end a term (Config.ReleaseTimeout).
func (e *Election) releaseTimeout() time.Duration {
	if e.cfg.ReleaseTimeout > 0 {
		return e.cfg.ReleaseTimeout
	}
	return e.opTimeout()
}

// opTimeout bounds the round trips a term makes on its own: no longer than
// the TTL, after which the lease is gone anyway.
func (e *Election) opTimeout() time.Duration {
	return min(5*time.Second, e.ttl)
}

// Resign gives up leadership and stops the campaign: Run returns nil once
// the current term, if any, has ended. The leading context is cancelled
// with cause ErrResigned; Resign then waits, until ctx ends, for
// OnStartedLeading to return and the lease to be released, so that the next
// candidate can lead when Resign returns. Called with the leading context
// (from inside OnStartedLeading) it does not wait, since the release waits
// for that callback. Resign when not campaigning does nothing.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	if !e.running {
		e.mu.Unlock()
		return nil
	}
	select {
	case <-e.resign:
	default:
		close(e.resign)
	}
	t := e.term
	e.mu.Unlock()
	if t == nil {
		return nil
	}
	t.cancel(ErrResigned)
	if v, ok := ctx.Value(leadingKey{}).(leadingValue); ok && v.e == e && v.rec == t.rec {
		return nil
	}
	select {
	case <-t.released:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// IsLeader reports whether this candidate leads now: a term of its Run has
// begun (OnStartedLeading was called) and its leading context has not
// ended. It asks Redis nothing: it is this process's own view, which the
// lease's context keeps within the lease (S4), so it may be false a moment
// before another candidate could lead, never true after.
func (e *Election) IsLeader() bool {
	e.mu.Lock()
	t := e.term
	e.mu.Unlock()
	return t != nil && t.began.Load() && t.ctx.Err() == nil
}

// Check is a liveness check for a process that campaigns: it returns an
// error wrapping ErrStuck when a term of this candidate is still under way
// more than tolerance after it should have ended: after its leading
// context ended (the lease was lost, Resign, Run's context), or after its
// lease's local deadline (by which that context ends). Such a term is one
// whose OnStartedLeading has not returned, so Run can neither release the
// lease nor campaign again, and no other candidate can lead while the
// lease is renewed: a process a liveness probe should restart, as
// client-go's leader-election health check does. A follower, a leader
// within its lease, and a term winding down within tolerance are healthy.
func (e *Election) Check(tolerance time.Duration) error {
	e.mu.Lock()
	t := e.term
	e.mu.Unlock()
	if t == nil || !t.began.Load() {
		return nil
	}
	if ended := t.endedAt.Load(); ended != 0 {
		if late := time.Since(time.Unix(0, ended)); late > tolerance {
			return fmt.Errorf("%w: %q: the term with fence %d ended %v ago (%v), and OnStartedLeading has not returned (%v tolerated)",
				ErrStuck, e.cfg.Name, t.rec.Fence, late.Round(time.Millisecond), context.Cause(t.ctx), tolerance)
		}
		return nil
	}
	if late := time.Since(t.lease.Deadline()); late > tolerance {
		return fmt.Errorf("%w: %q: the term with fence %d is %v past its lease's deadline (%v tolerated)",
			ErrStuck, e.cfg.Name, t.rec.Fence, late.Round(time.Millisecond), tolerance)
	}
	return nil
}

// HealthHandler returns an http.Handler for a liveness probe: it answers
// 200 and "ok" while Check(tolerance) is nil, and 503 with Check's error
// otherwise. Mount it where the probe looks (for example /healthz).
func (e *Election) HealthHandler(tolerance time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := e.Check(tolerance); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

// Leader returns the current leader, or an error wrapping ErrNoLeader when
// there is none (or the new one has not written its record yet).
func (e *Election) Leader(ctx context.Context) (Record, error) {
	rec, _, err := e.read(ctx)
	if err != nil {
		return Record{}, err
	}
	if rec.Fence == 0 {
		return Record{}, fmt.Errorf("%w for %q", ErrNoLeader, e.cfg.Name)
	}
	return rec, nil
}

// read returns the valid leader record (zero if none) and the lease key's
// remaining TTL (negative if unknown), in one MULTI/EXEC.
func (e *Election) read(ctx context.Context) (Record, time.Duration, error) {
	return ReadLeader(ctx, e.cfg.Client, e.keys.prefix, e.cfg.Name)
}

// ReadLeader reads the leader record of name under prefix ("" for
// lease.DefaultKeyPrefix), validated against the live lease as Leader does,
// with the lease key's remaining TTL (negative when the key has none or is
// missing). A zero Record means no leader. It is for tools that watch
// elections without taking part (the tenure command's status).
func ReadLeader(ctx context.Context, c redis.UniversalClient, prefix, name string) (Record, time.Duration, error) {
	if prefix == "" {
		prefix = lease.DefaultKeyPrefix
	}
	k := newKeys(prefix, name)
	var (
		rec   *redis.SliceCmd
		fence *redis.StringCmd
		typ   *redis.StatusCmd
		pttl  *redis.DurationCmd
	)
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		rec = p.HMGet(ctx, k.record, "identity", "fence")
		fence = p.Get(ctx, k.fence)
		typ = p.Type(ctx, k.lease)
		pttl = p.PTTL(ctx, k.lease)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Record{}, -1, fmt.Errorf("election: reading the leader of %q: %w", name, err)
	}
	ttl := pttl.Val()
	if ttl < 0 {
		ttl = -1
	}
	vals := rec.Val()
	if typ.Val() != "string" || len(vals) != 2 {
		return Record{}, ttl, nil
	}
	id, _ := vals[0].(string)
	fs, _ := vals[1].(string)
	f, err := strconv.ParseInt(fs, 10, 64)
	if err != nil || id == "" || fs != fence.Val() {
		return Record{}, ttl, nil
	}
	return Record{Name: name, Identity: id, Fence: f}, ttl, nil
}

// Observe returns a channel that receives the current leader at once, then
// every change: a new leader's Record, or the zero Record when the name is
// left without one. It is closed when ctx ends. Observe holds a pub/sub
// connection of its own while ctx lasts. A receiver that is slow misses
// intermediate terms; it always gets the latest. During a Redis outage it
// receives nothing new.
func (e *Election) Observe(ctx context.Context) <-chan Record {
	ch := make(chan Record)
	go func() {
		defer close(ch)
		ps := e.listen(ctx)
		defer func() { _ = ps.Close() }()
		msgs := ps.ChannelWithSubscriptions()
		timer := time.NewTimer(e.period)
		defer timer.Stop()
		var (
			last Record
			sent bool
		)
		for {
			// A deadline, not only ctx: go-redis ends a blocked read at a
			// context's deadline, not at its cancellation.
			rctx, cancel := context.WithTimeout(ctx, max(e.period, time.Second))
			rec, ttl, err := e.read(rctx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err == nil && (!sent || rec != last) {
				select {
				case ch <- rec:
				case <-ctx.Done():
					return
				}
				last, sent = rec, true
			}
			wait := e.period
			if err == nil && ttl >= 0 && ttl+time.Millisecond < wait {
				// The holder may die: look again when its key expires.
				wait = ttl + time.Millisecond
			}
			timer.Reset(wait)
			select {
			case m := <-msgs:
				if s, ok := m.(*redis.Subscription); ok && s.Kind == "sunsubscribe" {
					// The name's slot moved to another primary (a
					// Cluster): listen there.
					_ = ps.Close()
					ps = e.listen(ctx)
					msgs = ps.ChannelWithSubscriptions()
				}
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
