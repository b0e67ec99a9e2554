package reentrant_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/reentrant"
	"github.com/tenure-go/tenure/tests/redistest"
)

// Issue 47, item 1: a fresh owner goes out in the Lock's context, so the
// count it has on the server is not its first Lock's alone. The last Unlock
// of one Lock must take back its own entries, never the owner's whole count.

// TestUnlockKeepsAnEntryOfAnotherLocker: two Lockers on one Manager; the
// second enters the first's lock through its context. Unlocking the first
// leaves the second's entry, and the name held.
func TestUnlockKeepsAnEntryOfAnotherLocker(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t))
	k1, k2 := reentrant.New(m), reentrant.New(m)
	rival := newManager(t, srv.Client(t))
	ctx := context.Background()

	outer, err := k1.Lock(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := k2.Lock(outer.Context(), "acct")
	if err != nil {
		t.Fatal(err)
	}
	if got := count(t, raw, "acct", outer.Owner()); got != 2 {
		t.Fatalf("count after the second Locker entered: %d, want 2", got)
	}
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := count(t, raw, "acct", outer.Owner()); got != 1 || inner.Err() != nil {
		t.Fatalf("after the outer Unlock: count %d, inner.Err() %v; want 1 and nil", got, inner.Err())
	}
	if l, err := rival.TryAcquire(ctx, "acct"); err == nil {
		_ = l.Release(ctx)
		t.Fatal("another Manager acquired a name that a live Lock still holds")
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := raw.Exists(ctx, "tenure:{acct}").Val(); n != 0 {
		t.Fatalf("after the last Unlock the key is still there (%d)", n)
	}
}

// TestUnlockRacingAnEntryThroughItsContext: in one Locker, a Lock made with
// the outer Lock's context while its last Unlock's release is on its way
// enters on the server; the release must not delete the key under it.
func TestUnlockRacingAnEntryThroughItsContext(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	releasing := make(chan struct{})
	entered := make(chan struct{})
	var once sync.Once
	hold := func(ctx context.Context, l *lease.Lease) context.Context {
		once.Do(func() {
			close(releasing)
			<-entered // the release waits until the racing Lock returned
		})
		return ctx
	}
	k := reentrant.New(newManager(t, srv.Client(t), lease.WithHooks(lease.Hooks{ReleaseStart: hold})))
	ctx := context.Background()
	outer, err := k.Lock(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	var (
		inner    *reentrant.Lock
		innerErr error
	)
	go func() {
		<-releasing
		inner, innerErr = k.Lock(outer.Context(), "acct")
		close(entered)
	}()
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	<-entered
	if innerErr != nil {
		t.Fatalf("the racing Lock: %v", innerErr)
	}
	if got := count(t, raw, "acct", outer.Owner()); got != 1 || inner.Err() != nil {
		t.Fatalf("after the release: count %d, inner.Err() %v; want 1 and nil", got, inner.Err())
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := raw.Exists(ctx, "tenure:{acct}").Val(); n != 0 {
		t.Fatal("the key outlived its last Lock")
	}
}

// TestLostUnlockKeepsANewHold: a Lock lost to its local deadline while its
// key lives on the server, then a new hold of the same owner (another
// Manager, the owner passed on) that enters that key. The lost Lock's
// Unlock still deletes what it had, token-safely: only its own entry. Under
// testing/synctest over the in-memory server, for the timing is the point.
func TestLostUnlockKeepsANewHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := leasetest.NewServer()
		mgr := func() *lease.Manager {
			m, err := srv.NewManager(lease.WithLogger(quiet), lease.WithOpTimeout(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close() })
			return m
		}
		k1, k2 := reentrant.New(mgr()), reentrant.New(mgr())
		ctx := context.Background()
		old, err := k1.Lock(ctx, "acct", lease.WithTTL(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		srv.SetUnreachable(true) // renewals go unanswered: lost to the deadline
		<-old.Done()
		if !errors.Is(old.Err(), lease.ErrLost) {
			t.Fatalf("old: %v, want ErrLost", old.Err())
		}
		srv.SetUnreachable(false)
		if held, _ := srv.Holder("acct"); !held {
			t.Fatal("the key expired with the local deadline: nothing to test")
		}
		anew, err := k2.Lock(reentrant.WithOwner(ctx, old.Owner()), "acct")
		if err != nil {
			t.Fatal(err)
		}
		_ = old.Unlock(ctx)
		if held, _ := srv.Holder("acct"); !held || anew.Err() != nil {
			t.Fatalf("the lost Lock's Unlock: name held %v, new hold's Err %v; want held and nil", held, anew.Err())
		}
		if err := anew.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if held, _ := srv.Holder("acct"); held {
			t.Fatal("the key outlived its last Lock")
		}
	})
}

// TestUnlockOfAnExpiredHoldKeepsTheNextHold: a Lock's hold expires on the
// server as well (no renewal), and the owner, shared, takes the name again:
// a new hold, a new fence. The expired Lock's Unlock, which still sends its
// release, and its inner Unlock, must take back nothing of the new hold:
// had they, the name would be free, or its count short, under the new
// holder. On a real server, whose fences and TTLs are its own.
func TestUnlockOfAnExpiredHoldKeepsTheNextHold(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	k1 := reentrant.New(newManager(t, srv.Client(t)))
	k2 := reentrant.New(newManager(t, srv.Client(t)))
	ctx := reentrant.WithOwner(context.Background(), "job-7")
	old, err := k1.Lock(ctx, "ledger", lease.WithTTL(200*time.Millisecond), lease.WithAutoRenew(false))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := k1.Lock(old.Context(), "ledger")
	if err != nil {
		t.Fatal(err)
	}
	<-old.Done()
	for deadline := time.Now().Add(30 * time.Second); raw.Exists(ctx, "tenure:{ledger}").Val() != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a key of 200ms still there after 30s")
		}
	}
	anew, err := k2.Lock(ctx, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if anew.Fence() <= old.Fence() {
		t.Fatalf("fences %d then %d", old.Fence(), anew.Fence())
	}
	_ = inner.Unlock(context.Background())
	_ = old.Unlock(context.Background())
	if got := count(t, raw, "ledger", "job-7"); got != 1 || anew.Err() != nil {
		t.Fatalf("after the expired hold's Unlocks: count %d, new hold's Err %v; want 1 and nil", got, anew.Err())
	}
	if _, err := reentrant.New(newManager(t, srv.Client(t))).TryLock(context.Background(), "ledger"); !errors.Is(err, lease.ErrNotAcquired) {
		t.Fatalf("another owner, under the new hold: %v, want ErrNotAcquired", err)
	}
	if err := anew.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if raw.Exists(context.Background(), "tenure:{ledger}").Val() != 0 {
		t.Fatal("the key outlived its last Lock")
	}
}

// Issue 47, item 2: every entry and exit is applied once, whatever is
// resent or taken back.

// faults is a go-redis hook that misbehaves, once each, on the script
// commands it is armed for: it resends one (as go-redis does after a lost
// reply), loses the reply of one after the server applied it, or loses one
// before it reaches the server.
type faults struct {
	mu    sync.Mutex
	arms  []arm
	sends [][]any // every script command sent, as sent
}

type arm struct {
	match func(args []any) bool
	do    string // "resend", "after" (applied, reply lost), "before" (lost)
}

var errLostReply = fmt.Errorf("test: reply lost: %w", os.ErrDeadlineExceeded)

func (f *faults) arm(do string, match func(args []any) bool) {
	f.mu.Lock()
	f.arms = append(f.arms, arm{match, do})
	f.mu.Unlock()
}

func (f *faults) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *faults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (f *faults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		name := strings.ToLower(fmt.Sprint(args[0]))
		if name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		f.mu.Lock()
		f.sends = append(f.sends, args)
		do := ""
		for i, a := range f.arms {
			if a.match(args) {
				do = a.do
				f.arms = append(f.arms[:i], f.arms[i+1:]...)
				break
			}
		}
		f.mu.Unlock()
		switch do {
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

// script tells the command of one of tenure's scripts by its keys: their
// number, and a part of the last one.
func script(nkeys int, part string) func(args []any) bool {
	return func(args []any) bool {
		if len(args) < 3+nkeys || fmt.Sprint(args[2]) != fmt.Sprint(nkeys) {
			return false
		}
		last := args[2+nkeys]
		if p, ok := last.(*string); ok {
			last = *p
		}
		s, _ := last.(string)
		return strings.Contains(s, part)
	}
}

var (
	acquireCmd = script(5, ":queue:expiry") // acquire.lua
	// reenter.lua, and a reentrant lock's release.lua, both have the keys
	// lock, marker and fence: reenter.lua has 3 arguments after them,
	// release.lua 5 (the last the hold's fence).
	reenterCmd = withArgs(script(3, ":fence"), 3)
	releaseCmd = withArgs(script(3, ":fence"), 5)
)

// withArgs narrows a script matcher to commands with n arguments after the
// keys.
func withArgs(match func(args []any) bool, n int) func(args []any) bool {
	return func(args []any) bool {
		if !match(args) {
			return false
		}
		nkeys, _ := strconv.Atoi(fmt.Sprint(args[2]))
		return len(args) == 3+nkeys+n
	}
}

func faultyClient(t *testing.T, srv *redistest.Server) (*redis.Client, *faults) {
	c := srv.Client(t)
	f := &faults{}
	c.AddHook(f)
	return c, f
}

// TestResentAcquireEntersOnce: the acquire of a shared owner, sent again
// with the same token and arguments after its reply was lost, gets the
// first answer and adds no entry; after the one Unlock the name is free.
func TestResentAcquireEntersOnce(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	c, f := faultyClient(t, srv)
	k := reentrant.New(newManager(t, c))
	rival := newManager(t, srv.Client(t))
	ctx := reentrant.WithOwner(context.Background(), "job-42")

	f.arm("resend", acquireCmd)
	lk, err := k.Lock(ctx, "batch", lease.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got := count(t, raw, "batch", "job-42"); got != 1 {
		t.Fatalf("count after a resent acquire: %d, want 1", got)
	}
	// The captured command once more, as sent: still one entry.
	f.mu.Lock()
	sent := f.sends[0]
	f.mu.Unlock()
	if err := raw.Do(ctx, sent...).Err(); err != nil {
		t.Fatal(err)
	}
	if got := count(t, raw, "batch", "job-42"); got != 1 {
		t.Fatalf("count after the captured EVALSHA was sent again: %d, want 1", got)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := rival.TryAcquire(context.Background(), "batch")
	if err != nil {
		t.Fatalf("after the one Unlock another Manager is refused: %v", err)
	}
	_ = l.Release(context.Background())
	if err := raw.Do(ctx, sent...).Err(); err != nil {
		t.Fatal(err)
	}
	if n := raw.Exists(ctx, "tenure:{batch}").Val(); n != 0 {
		t.Fatal("a copy of the acquire arriving after the release took the name")
	}
}

// TestUnansweredEntriesAndExitsApplyOnce: a shared owner's entries and exits
// whose replies are lost, applied or not, leave the count exact: a re-entry
// through acquire.lua taken back by abandon.lua, a re-entry through
// reenter.lua taken back, and an inner exit, applied or lost on its way.
func TestUnansweredEntriesAndExitsApplyOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		do    string
		match func([]any) bool
		exit  bool // the fault hits the inner Unlock, not the inner Lock
		other bool // the inner Lock goes through another Locker (acquire.lua)
	}{
		{"acquire applied, reply lost", "after", acquireCmd, false, true},
		{"reenter applied, reply lost", "after", reenterCmd, false, false},
		{"exit applied, reply lost", "after", releaseCmd, true, false},
		{"exit lost on its way", "before", releaseCmd, true, false},
		{"exit resent", "resend", releaseCmd, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			raw := srv.Client(t)
			c, f := faultyClient(t, srv)
			m := newManager(t, c)
			k, k2 := reentrant.New(m), reentrant.New(m)
			ctx := reentrant.WithOwner(context.Background(), "job")
			warmUp(t, k, k2, ctx) // EVALSHA finds every script: a fault hits the script itself
			outer, err := k.Lock(ctx, "n")
			if err != nil {
				t.Fatal(err)
			}
			if !tc.exit {
				f.arm(tc.do, tc.match)
			}
			via := k
			if tc.other {
				via = k2
			}
			inner, err := via.Lock(outer.Context(), "n")
			if tc.exit {
				if err != nil {
					t.Fatal(err)
				}
				f.arm(tc.do, tc.match)
				_ = inner.Unlock(context.Background())
			}
			if err == nil && !tc.exit {
				_ = inner.Unlock(context.Background()) // a retry entered: not what is tested
			}
			unanswered(t, raw, "n")
			if got := count(t, raw, "n", "job"); got != 1 {
				t.Fatalf("count with one Lock live: %d, want 1", got)
			}
			if err := outer.Unlock(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := raw.Exists(context.Background(), "tenure:{n}").Val(); n != 0 {
				t.Fatalf("after the last Unlock: count %d left", count(t, raw, "n", "job"))
			}
		})
	}
}

// warmUp makes the server load every script a Lock and an Unlock send,
// on another name.
func warmUp(t *testing.T, k, k2 *reentrant.Locker, ctx context.Context) {
	t.Helper()
	outer, err := k.Lock(ctx, "warm")
	if err != nil {
		t.Fatal(err)
	}
	var locks []*reentrant.Lock
	for _, via := range []*reentrant.Locker{k, k2} {
		lk, err := via.Lock(outer.Context(), "warm")
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, lk)
	}
	for _, lk := range append(locks, outer) {
		if err := lk.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// unanswered waits, generously, for the Manager's take-backs and resends
// of unanswered requests to reach the server: until the owner's count has
// not changed for a while.
func unanswered(t *testing.T, raw *redis.Client, name string) {
	t.Helper()
	last, still := int64(-1), 0
	for i := 0; i < 200 && still < 10; i++ {
		n := count(t, raw, name, "job")
		if n == last {
			still++
		} else {
			last, still = n, 0
		}
		time.Sleep(20 * time.Millisecond)
	}
}
