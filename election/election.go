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
	"github.com/tenure-go/tenure/internal/refusal"
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
	// Manager holds the leadership lease; its watchdog renews it. Any
	// Manager: lease.New's, lease.NewQuorum's or package leasetest's (see
	// the package documentation, "Managers").
	Manager *lease.Manager
	// Client is where the leader record is written, where Leader and
	// Observe read it, and where Observe subscribes to the change
	// messages. Leave it nil to use the client the Manager was made with
	// (lease.New's); it is required without a Manager, and with a Manager
	// that has no single client of its own: lease.NewQuorum's (give one of
	// its servers, where the record is kept while that server holds the
	// lease), or leasetest's (any Redis: the lease never lives there, so
	// no record is written and observers see no leader). When both are
	// set with lease.New's Manager, Client is used as given: it must reach
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
	// the lease has expired anyway; a lost lease's release, which goes on
	// in the background, gets no more than the TTL either). The Manager's
	// hooks (ReleaseDone) see the release's outcome.
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
	// OnStartedLeading has returned and the lease was released, or, when
	// the lease was lost under the term, while its release goes on in the
	// background. It may call Resign. Optional.
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

	// strict: the Manager has a client of its own (lease.New's), so the
	// lease and the record live on the same Redis deployment and a record
	// that cannot be written means the lease does not hold the name there.
	// A quorum's or leasetest's lease lives elsewhere than Client: its
	// record is kept where it can be (record.go), and leading never waits
	// for it.
	strict bool

	mu      sync.Mutex
	running bool
	// stopCampaign ends the running campaign's context (Resign); called
	// under mu, so that a term that registers itself sees it (newTerm).
	stopCampaign context.CancelCauseFunc
	term         *term // the current term, from its acquisition until OnStartedLeading has returned
	// busy is closed once the campaign's current attempt holds nothing:
	// registered before each Acquire and closed when the lease it got is
	// released (or it got none). Resign waits for it.
	busy chan struct{}
}

// term is one leadership of this candidate.
type term struct {
	rec     Record
	lease   *lease.Lease
	ctx     context.Context // the leading context
	cancel  context.CancelCauseFunc
	began   atomic.Bool  // OnStartedLeading was called
	endedAt atomic.Int64 // when the leading context ended, Unix ns; 0 before
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
	strict := false
	if cfg.Manager != nil {
		own := inside.Client(cfg.Manager)
		strict = own != nil
		if cfg.Client == nil {
			cfg.Client = own
		}
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
	e := &Election{cfg: cfg, keys: newKeys(prefix, cfg.Name), ttl: cfg.TTL, period: cfg.RetryPeriod, strict: strict}
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
	// The campaign's context ends with ctx or at Resign.
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if err := e.startRunning(cancel); err != nil {
		return err
	}
	defer e.stopRunning()
	if cb.OnNewLeader != nil {
		stopReporting := e.reportLeaders(ctx, cb.OnNewLeader)
		defer stopReporting()
	}
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

// startRunning marks the Election as running, with stop as the function
// with which Resign ends this Run's campaign, or returns ErrRunning if a
// Run already is.
func (e *Election) startRunning(stop context.CancelCauseFunc) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running {
		return ErrRunning
	}
	e.running, e.stopCampaign = true, stop
	return nil
}

// stopRunning undoes startRunning: Run may be called again, and Resign
// does nothing until it is.
func (e *Election) stopRunning() {
	e.mu.Lock()
	e.running, e.stopCampaign = false, nil
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
// or an error that no retry mends; it returns what Run returns. Each
// attempt is registered (attempt) before its Acquire, so that a Resign
// that comes while the lease is being taken waits for its release; and
// the next attempt, and Run's return, wait for a lost term's release,
// which goes on in the background (lead).
func (e *Election) campaign(ctx, cctx context.Context, cb Callbacks) error {
	var busy chan struct{}
	defer func() { wait(busy) }()
	for {
		wait(busy)
		if busy = e.attempt(cctx); busy == nil {
			return e.stop(ctx, cctx)
		}
		l, err := e.cfg.Manager.Acquire(cctx, e.cfg.Name, lease.WithTTL(e.ttl))
		if err != nil {
			e.finish(busy)
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
		if err := e.lead(cctx, l, cb, busy); err != nil {
			if errors.Is(err, lease.ErrClosed) || refused(err) {
				return err
			}
			if !sleep(cctx, e.period) {
				return e.stop(ctx, cctx)
			}
		}
	}
}

// wait waits until ch, if any, is closed.
func wait(ch chan struct{}) {
	if ch != nil {
		<-ch
	}
}

// attempt registers a campaign attempt that may come to hold the lease,
// and returns the channel to close (finish) once it holds nothing; nil
// when the campaign has ended, and no attempt may begin. Resign ends the
// campaign under mu, so either it sees the attempt and waits for it, or
// the attempt sees the campaign ended.
func (e *Election) attempt(cctx context.Context) chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cctx.Err() != nil {
		return nil
	}
	e.busy = make(chan struct{})
	return e.busy
}

// finish marks the attempt busy as holding nothing any more.
func (e *Election) finish(busy chan struct{}) {
	e.mu.Lock()
	if e.busy == busy {
		e.busy = nil
	}
	e.mu.Unlock()
	close(busy)
}

// refused reports whether err is the server refusing the user rather than
// failing: a permission error (NOPERM, or a command a script called
// refused) or an authentication error (WRONGPASS, NOAUTH).
func refused(err error) bool {
	return refusal.Of(err) != refusal.None
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
// leading context ends and the callback has returned, releases the lease,
// closes busy, and then calls OnStoppedLeading, so that a Resign from
// there finds nothing to wait for. A lease that ended under the term
// (lost, or its manager closed) is released in the background, so that
// OnStoppedLeading is not held up by a Redis that does not answer; busy is
// closed when that release is done. lead returns an error when the term
// could not begin (the record could not be written) or the manager
// closed.
func (e *Election) lead(cctx context.Context, l *lease.Lease, cb Callbacks, busy chan struct{}) error {
	t, stop := e.newTerm(cctx, l)
	defer stop()
	err := e.serve(t, cb)
	// The term is over for Check and IsLeader: what is left is bounded by
	// the release's timeout.
	e.mu.Lock()
	e.term = nil
	e.mu.Unlock()
	if l.Err() == nil {
		e.release(l, e.releaseTimeout())
		e.finish(busy)
	} else {
		go func() {
			defer e.finish(busy)
			e.release(l, e.lostReleaseTimeout())
		}()
	}
	if t.began.Load() && cb.OnStoppedLeading != nil {
		cb.OnStoppedLeading()
	}
	if err != nil {
		return err
	}
	if cause := context.Cause(t.ctx); errors.Is(cause, lease.ErrClosed) {
		return cause
	}
	return nil
}

// newTerm makes l's term and registers it as the current one; the
// returned function undoes what only the term needed. A campaign already
// ended (Resign, which ends it under mu before it reads e.term, or Run's
// context) ends the leading context here, at once: it does not wait for
// the AfterFunc.
func (e *Election) newTerm(cctx context.Context, l *lease.Lease) (*term, func()) {
	rec := Record{Name: e.cfg.Name, Identity: e.cfg.Identity, Fence: l.Fence()}
	lctx, cancel := context.WithCancelCause(context.WithValue(l.Context(), leadingKey{}, leadingValue{e, rec}))
	t := &term{rec: rec, lease: l, ctx: lctx, cancel: cancel}
	stopAfter := context.AfterFunc(cctx, func() { cancel(context.Cause(cctx)) })
	stopEnded := context.AfterFunc(lctx, func() { t.endedAt.Store(time.Now().UnixNano()) })
	e.mu.Lock()
	e.term = t
	if cctx.Err() != nil {
		cancel(context.Cause(cctx))
	}
	e.mu.Unlock()
	return t, func() {
		stopAfter()
		stopEnded()
	}
}

// serve writes the term's record and runs OnStartedLeading until it
// returns. It returns an error when the term could not begin. Where the
// record is kept apart from the lease (!e.strict: a quorum's or
// leasetest's Manager) the term begins whether or not it could be
// written, unless the server refused the user.
func (e *Election) serve(t *term, cb Callbacks) error {
	if err := e.writeRecord(t.ctx, t.lease, t.rec); err != nil && (e.strict || refused(err)) {
		t.cancel(err)
		if cause := context.Cause(t.ctx); errors.Is(cause, lease.ErrClosed) {
			return cause
		}
		return fmt.Errorf("election: %q: writing the leader record: %w", e.cfg.Name, err)
	}
	if t.ctx.Err() != nil {
		// Ended (resigned, lost) while the record was written: this term
		// never began.
		return nil
	}
	done := make(chan struct{})
	t.began.Store(true)
	go func() {
		defer close(done)
		cb.OnStartedLeading(t.ctx)
	}()
	e.keepRecord(t)
	<-done
	return nil
}

// keepRecord rewrites the leader record, and so refreshes its TTL, until
// the term ends. The record expires with the lease's TTL, so that a leader
// whose process dies or whose manager is closed under it leaves no key
// behind for good (S6); while the term lasts it is rewritten as often as
// the lease is renewed, and only while the lease holds the name there, so
// a successor's record is never touched. Rewriting, not only refreshing,
// puts back a record that a server of a quorum missed. A refresh that
// fails is tried again at the next tick: the lease itself ends before the
// record could expire unless its renewals succeed too. One that finds the
// lease gone, on the Redis the lease lives on (e.strict), ends the term:
// the name was deleted or taken over.
func (e *Election) keepRecord(t *term) {
	tick := time.NewTicker(e.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-tick.C:
			// No later than the lease's local deadline, past which a
			// refresh is of no use: one still waiting for its reply then
			// would hold up the term's end, since a client with
			// ContextTimeoutEnabled heeds the deadline, not the leading
			// context's cancellation.
			until := time.Now().Add(e.opTimeout())
			if dl := t.lease.Deadline(); dl.Before(until) {
				until = dl
			}
			ctx, cancel := context.WithDeadline(t.ctx, until)
			err := e.putRecord(ctx, t.lease, t.rec)
			cancel()
			if e.strict && errors.Is(err, errNotHolding) {
				t.cancel(err)
				return
			}
		}
	}
}

// release ends a term on the server within timeout: the record goes
// (while the lease still holds the name, so a successor's record is never
// touched), then the lease, whose release wakes the waiting candidates.
// A manager's Close has released the lease already: its record, which no
// script could delete any more, expires with the TTL.
func (e *Election) release(l *lease.Lease, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if !errors.Is(context.Cause(l.Context()), lease.ErrClosed) {
		_ = e.deleteRecord(ctx, l)
	}
	_ = l.Release(ctx)
}

// lostReleaseTimeout bounds the release of a lease that ended under its
// term. That release is a courtesy, but not a useless one: a renewal that
// was applied but answered after the lease's local deadline left the key
// on the server for up to a TTL from then, and the record with it, which
// observers would report as the leader while IsLeader is false, and which
// would keep every candidate out. Past a TTL from now the key has expired
// anyway, so the release waits no longer than that.
func (e *Election) lostReleaseTimeout() time.Duration {
	return min(e.releaseTimeout(), e.ttl)
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
// candidate can lead when Resign returns. That holds from the moment the
// campaign asks for the lease, before a term has begun: a lease that
// Acquire is just returning is released before Resign returns. Called with
// the leading context (from inside OnStartedLeading) it does not wait,
// since the release waits for that callback; called from OnStoppedLeading
// it waits only for a lost lease's release, which does not wait for that
// callback either. Resign when not campaigning does nothing.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	if !e.running {
		e.mu.Unlock()
		return nil
	}
	e.stopCampaign(ErrResigned)
	t, busy := e.term, e.busy
	e.mu.Unlock()
	if t != nil {
		t.cancel(ErrResigned)
		if v, ok := ctx.Value(leadingKey{}).(leadingValue); ok && v.e == e && v.rec == t.rec {
			return nil
		}
	}
	if busy == nil {
		return nil
	}
	select {
	case <-busy:
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
		value *redis.StringCmd
	)
	sent, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		rec = p.HMGet(ctx, k.record, "identity", "fence", "lease")
		fence = p.Get(ctx, k.fence)
		typ = p.Type(ctx, k.lease)
		pttl = p.PTTL(ctx, k.lease)
		// The value, to tell a lease from the revocation marker that
		// "tenure release --force" leaves in its place: GET of a key of
		// another kind is WRONGTYPE, which is no error here.
		value = p.Get(ctx, k.lease)
		return nil
	})
	if err != nil {
		for _, cmd := range sent {
			if e := cmd.Err(); e != nil && !errors.Is(e, redis.Nil) && !(cmd == value && redis.HasErrorPrefix(e, "WRONGTYPE")) {
				return Record{}, -1, fmt.Errorf("election: reading the leader of %q: %w", name, e)
			}
		}
	}
	ttl := pttl.Val()
	if ttl < 0 {
		ttl = -1
	}
	vals := rec.Val()
	v := value.Val()
	if typ.Val() != "string" || strings.HasPrefix(v, layout.RevokedPrefix) || len(vals) != 3 {
		// No lease holds the name: nothing, another kind of lock, or a
		// revoked lease, whose holder no longer leads or is about to
		// learn that it does not.
		return Record{}, ttl, nil
	}
	id, _ := vals[0].(string)
	fs, _ := vals[1].(string)
	digest, _ := vals[2].(string)
	f, err := strconv.ParseInt(fs, 10, 64)
	if err != nil || id == "" || !recordHolds(digest, v, fs, fence.Val()) {
		return Record{}, ttl, nil
	}
	return Record{Name: name, Identity: id, Fence: f}, ttl, nil
}

// recordHolds reports whether a record is the one of the lease whose
// stored value is value: its lease digest is that value's. A record
// written before records had one (an older tenure) is checked as it was
// then: its fence is the name's fencing counter, which moves on with every
// acquisition. The digest is needed on a quorum, where a server's counter
// need not be the lease's fence (the fence is its majority's largest).
func recordHolds(digest, value, fence, counter string) bool {
	if digest != "" {
		return digest == leaseDigest(value)
	}
	return fence == counter
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
