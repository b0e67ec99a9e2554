package reentrant_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/reentrant"
	"github.com/tenure-go/tenure/tests/redistest"
)

var propertyFor = flag.Duration("reentrant.property", 1500*time.Millisecond,
	"how long TestNeverFreeWhileLocked runs its random Locks and Unlocks (e.g. 2m for a long run)")

// TestNeverFreeWhileLocked is the property of issue 47: random interleavings
// of Lock and Unlock across Lockers of two Managers, owners shared through
// Lock contexts and WithOwner, with requests resent, and replies lost before
// or after the server applied them. A checker reads the server all along:
// no name is ever free while any Lock of it is live. After the last Unlock
// (and the Managers' take-backs) every name is free: no count was left one
// too high.
func TestNeverFreeWhileLocked(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (-reentrant.property=%v)", seed, *propertyFor)
	managers, lockers := chaosLockers(t, srv, seed)
	names := []string{"p0", "p1"}
	live := &liveLocks{locks: map[*reentrant.Lock]struct{}{}}
	stopChecking := checkAllAlong(t, raw, names, live)

	var wg sync.WaitGroup
	deadline := time.Now().Add(*propertyFor)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(rng *rand.Rand) {
			defer wg.Done()
			for time.Now().Before(deadline) {
				step(t, rng, lockers, names, live)
			}
		}(rand.New(rand.NewPCG(seed, uint64(100+w))))
	}
	wg.Wait()
	for _, lk := range live.takeAll() {
		unlock(t, lk)
	}
	checked := stopChecking()
	for _, m := range managers {
		_ = m.Close() // waits for the take-backs and resends under way
	}
	for _, name := range names {
		if n := raw.Exists(context.Background(), "tenure:{"+name+"}").Val(); n != 0 {
			t.Errorf("%q is still held after its last Unlock: %v", name, raw.HGetAll(context.Background(), "tenure:{"+name+"}").Val())
		}
	}
	t.Logf("%d Locks, %d checks", live.made.Load(), checked)
}

// chaosLockers returns two Managers whose clients misbehave at random
// (chaos), and two Lockers on each.
func chaosLockers(t *testing.T, srv *redistest.Server, seed uint64) ([]*lease.Manager, []*reentrant.Locker) {
	var managers []*lease.Manager
	var lockers []*reentrant.Locker
	for i := 0; i < 2; i++ {
		c := srv.Client(t)
		ch := &chaos{rng: rand.New(rand.NewPCG(seed, uint64(i))), seen: map[string]bool{}, finals: map[string]bool{}, done: map[string]int{}}
		c.AddHook(ch)
		t.Cleanup(func() { ch.mu.Lock(); t.Logf("faults of client %d: %v", i, ch.done); ch.mu.Unlock() })
		m := newManager(t, c, lease.WithTTL(5*time.Second), lease.WithOpTimeout(2*time.Second))
		managers = append(managers, m)
		lockers = append(lockers, reentrant.New(m), reentrant.New(m))
	}
	return managers, lockers
}

// checkAllAlong reads the server until the returned function is called,
// which returns how many reads found a Lock live; a name free while a Lock
// of it is live fails the test.
func checkAllAlong(t *testing.T, raw *redis.Client, names []string, live *liveLocks) func() int64 {
	stop, done := make(chan struct{}), make(chan struct{})
	var checked atomic.Int64
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			read := false
			for _, name := range names {
				lk, r := live.freeUnder(raw, name)
				if lk != nil {
					t.Errorf("%q is free on the server while a Lock of it is live (owner %s)", name, lk.Owner())
				}
				read = read || r
				if r {
					checked.Add(1)
				}
			}
			if !read {
				time.Sleep(100 * time.Microsecond) // no Lock live: nothing to check
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return checked.Load()
	}
}

// step makes one random Lock or Unlock.
func step(t *testing.T, rng *rand.Rand, lockers []*reentrant.Locker, names []string, live *liveLocks) {
	if rng.IntN(100) < 45 {
		if lk := live.takeOne(rng); lk != nil {
			unlock(t, lk)
			return
		}
	}
	ctx, name := context.Background(), names[rng.IntN(len(names))]
	switch r := rng.IntN(100); {
	case r < 20: // a fresh owner
	case r < 45:
		ctx = reentrant.WithOwner(ctx, fmt.Sprintf("job-%d", rng.IntN(2)))
	default: // under a live Lock: its owner, on another Locker perhaps
		if lk := live.pick(rng); lk != nil {
			ctx, name = lk.Context(), lk.Name()
		}
	}
	lk, err := lockers[rng.IntN(len(lockers))].TryLock(ctx, name)
	if err == nil {
		live.add(lk)
	}
}

// unlock unlocks lk, which must not find its lock lost: nothing here takes
// a lock over or lets one expire.
func unlock(t *testing.T, lk *reentrant.Lock) {
	if err := lk.Unlock(context.Background()); errors.Is(err, lease.ErrLost) {
		t.Errorf("Unlock of %q: %v", lk.Name(), err)
	}
}

// liveLocks are the Locks returned and not yet given to Unlock.
type liveLocks struct {
	mu    sync.Mutex
	locks map[*reentrant.Lock]struct{}
	made  atomic.Int64
}

func (l *liveLocks) add(lk *reentrant.Lock) {
	l.made.Add(1)
	l.mu.Lock()
	l.locks[lk] = struct{}{}
	l.mu.Unlock()
}

func (l *liveLocks) pick(rng *rand.Rand) *reentrant.Lock {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := rng.IntN(len(l.locks) + 1)
	for lk := range l.locks {
		if i == 0 {
			return lk
		}
		i--
	}
	return nil
}

// takeOne removes a live Lock, to be unlocked.
func (l *liveLocks) takeOne(rng *rand.Rand) *reentrant.Lock {
	lk := l.pick(rng)
	if lk == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.locks[lk]; !ok {
		return nil // another worker took it
	}
	delete(l.locks, lk)
	return lk
}

func (l *liveLocks) takeAll() []*reentrant.Lock {
	l.mu.Lock()
	defer l.mu.Unlock()
	var all []*reentrant.Lock
	for lk := range l.locks {
		all = append(all, lk)
	}
	clear(l.locks)
	return all
}

// freeUnder returns a Lock of name that was live (returned, not given to
// Unlock, not ended) both before and after a read found name free on the
// server; nil when there is none. read says whether it read the server.
func (l *liveLocks) freeUnder(raw *redis.Client, name string) (lk *reentrant.Lock, read bool) {
	var before []*reentrant.Lock
	l.mu.Lock()
	for lk := range l.locks {
		if lk.Name() == name && lk.Err() == nil {
			before = append(before, lk)
		}
	}
	l.mu.Unlock()
	if len(before) == 0 {
		return nil, false
	}
	if raw.Exists(context.Background(), "tenure:{"+name+"}").Val() != 0 {
		return nil, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, lk := range before {
		if _, ok := l.locks[lk]; ok && lk.Err() == nil {
			return lk, true
		}
	}
	return nil, true
}

// chaos is a go-redis hook that, on the first send of each acquire,
// re-entry and exit, may resend it, lose its reply after the server applied
// it, or lose it on its way. A final release (its op is its acquire's
// token) is never lost on its way: that only leaves the key to its TTL, as
// documented, and the end check looks for counts left too high.
type chaos struct {
	mu     sync.Mutex
	rng    *rand.Rand
	seen   map[string]bool // the ops sent already: their resends and take-backs pass
	finals map[string]bool // acquire tokens: the ops of final releases
	done   map[string]int  // faults made, by kind and fault
}

func (c *chaos) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *chaos) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (c *chaos) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch c.choose(cmd.Args()) {
		case "resend":
			if err := next(ctx, cmd); err != nil {
				return err
			}
			return next(ctx, cmd)
		case "after":
			if err := next(ctx, cmd); err != nil {
				return err // NOSCRIPT, say: not applied, and EVAL follows
			}
			cmd.SetErr(errLostReply)
			return errLostReply
		case "before":
			cmd.SetErr(errLostReply)
			return errLostReply
		}
		return next(ctx, cmd)
	}
}

// choose decides what befalls one command: "" for nothing.
func (c *chaos) choose(args []any) string {
	kind := ""
	switch {
	case acquireCmd(args):
		kind = "acquire"
	case reenterCmd(args):
		kind = "reenter"
	case releaseCmd(args):
		kind = "release"
	default:
		return ""
	}
	op := retiredID(args)
	c.mu.Lock()
	defer c.mu.Unlock()
	if kind == "acquire" {
		c.finals[op] = true
	}
	if c.seen[kind+op] {
		return ""
	}
	c.seen[kind+op] = true
	do := ""
	switch r := c.rng.IntN(100); {
	case r < 8:
		do = "resend"
	case r < 16:
		do = "after"
	case r < 24 && !(kind == "release" && c.finals[op]):
		do = "before"
	}
	if do != "" {
		c.done[kind+" "+do]++
	}
	return do
}

// retiredID is the id of the P{N}:retired:<id> key a script command names:
// its request's token or op. Only the keys are read: an EVAL (sent after a
// NOSCRIPT) carries the script's text, whose comments name such keys too,
// and reading it made the EVAL a request of its own, which could then be
// lost on its way though it was a final release.
func retiredID(args []any) string {
	if len(args) < 3 {
		return ""
	}
	n, _ := strconv.Atoi(fmt.Sprint(args[2]))
	for _, a := range args[3:min(len(args), 3+n)] {
		if p, ok := a.(*string); ok {
			a = *p
		}
		if s, ok := a.(string); ok {
			if _, id, ok := strings.Cut(s, ":retired:"); ok {
				return id
			}
		}
	}
	return ""
}
