package watchdog_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure/watchdog"
)

// clients are the two ways a go-redis client ends a call on a dead
// connection: with its context (ContextTimeoutEnabled), or at its read
// timeout (the default, 3s), whatever its context does.
var clients = []struct {
	name        string
	readTimeout time.Duration
}{{"context", 0}, {"readTimeout", 3 * time.Second}}

// awaitDrop waits until l has dropped more connections than before: a
// call hung on a dead connection returned.
func awaitDrop(t *testing.T, l *link, before int) {
	t.Helper()
	for end := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, drops, _ := l.stats(); drops > before {
			return
		}
		if time.Now().After(end) {
			t.Fatal("the call on the dead connection never returned")
		}
	}
}

// killNext has the pooled connection that the next call takes die
// silently, once there is one and no call is out (which would put its
// connection back above it): whatever is sent on it is never answered.
func (l *link) killNext() {
	for ; ; time.Sleep(time.Millisecond) {
		l.mu.Lock()
		if n := len(l.idle); n > 0 && l.out == 0 {
			l.idle[n-1].dead = true
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
	}
}

// L1: a pooled connection that dies silently, again and again, each time
// as soon as the call hung on the one before has returned, costs no
// lease: each renewal that hangs gets its second attempt, on a live
// connection, in time. A 3s lease at the default interval. The attempt
// that the second attempt's answer cancelled used to count as given up,
// and its whole wait (to go-redis's 3s read timeout) became the patience
// of the next second attempt, sent 6s after the first: the second death
// lost the lease while the server still held it.
func TestSilentDeathsInARowAreHedged(t *testing.T) {
	for _, cl := range clients {
		for deaths := 1; deaths <= 3; deaths++ {
			t.Run(fmt.Sprintf("%s/deaths=%d", cl.name, deaths), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					l := &link{rtt: 5 * time.Millisecond, readTimeout: cl.readTimeout}
					w := watchdog.New[string](l, watchdog.Config{Drift: drift})
					defer w.Close()
					lost := holdOn(t, w, 1, 3*time.Second)
					time.Sleep(2500 * time.Millisecond) // between renewals
					for k := range deaths {
						_, before, _ := l.stats()
						l.killNext()
						awaitDrop(t, l, before)
						noLoss(t, lost, fmt.Sprintf("death %d of %d", k+1, deaths))
					}
					time.Sleep(10 * time.Second)
					noLoss(t, lost, fmt.Sprintf("%d silent deaths in a row", deaths))
				})
			})
		}
	}
}

// L1 at every renewal interval the options allow (lease refuses TTL/2 and
// above): one silent death between two renewals costs no lease, the
// second attempt going out although the hung batch itself has made the
// watchdog Behind (WaitingForAnswer, a third of the way to its loss). At
// intervals from about 0.4 TTL that came before the second attempt was
// due, and none was sent: the lease was lost.
func TestSilentDeathAtEveryInterval(t *testing.T) {
	const ttl = 3 * time.Second
	intervals := []time.Duration{}
	for iv := ttl / 10; iv < ttl/2; iv += ttl / 20 {
		intervals = append(intervals, iv)
	}
	intervals = append(intervals, ttl/3, ttl/2-time.Millisecond) // the default, and the most lease allows
	for _, cl := range clients {
		for _, rtt := range []time.Duration{5 * time.Millisecond, 200 * time.Millisecond} {
			for _, iv := range intervals {
				t.Run(fmt.Sprintf("%s/rtt=%v/interval=%v", cl.name, rtt, iv), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						silentDeathAt(t, ttl, iv, rtt, cl.readTimeout)
					})
				})
			}
		}
	}
}

// silentDeathAt holds a lease of ttl renewed every iv over a link of rtt
// whose pooled connection dies silently half way between two renewals,
// and fails if the lease is lost.
func silentDeathAt(t *testing.T, ttl, iv, rtt, readTimeout time.Duration) {
	l := &link{rtt: rtt, readTimeout: readTimeout}
	w := watchdog.New[string](l, watchdog.Config{Drift: drift})
	defer w.Close()
	lost := make(chan error, 1)
	if _, err := w.Add("x", ttl, time.Now(), iv, true, watchdog.LostFunc(func(err error) { lost <- err })); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2*iv + iv/2)
	_, before, _ := l.stats()
	l.killNext()
	awaitDrop(t, l, before)
	time.Sleep(3 * ttl)
	noLoss(t, lost, fmt.Sprintf("one silent death, interval %v", iv))
}

// unanswered records when its lease heard ErrUnanswered: when a second
// attempt became due.
type unanswered struct {
	mu  sync.Mutex
	at  []time.Time
	err chan error
}

func (u *unanswered) Lost(err error) { u.err <- err }
func (u *unanswered) Renewed(err error) {
	if errors.Is(err, watchdog.ErrUnanswered) {
		u.mu.Lock()
		u.at = append(u.at, time.Now())
		u.mu.Unlock()
	}
}

// An attempt cancelled because the other answered says nothing of the
// round trip, however long it runs on: after a silent death whose hung
// call ran to go-redis's 3s read timeout, the next death's second attempt
// is due half an interval after the hung call, as the first death's was
// (the round trips seen are milliseconds), not at the latest the loss
// allows, where a patience of those 3s put it.
func TestCancelledAttemptIsNoRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl, iv = 3 * time.Second, time.Second
		l := &link{rtt: 5 * time.Millisecond, readTimeout: 3 * time.Second}
		w := watchdog.New[string](l, watchdog.Config{Drift: drift})
		defer w.Close()
		h := &unanswered{err: make(chan error, 1)}
		if _, err := w.Add("x", ttl, time.Now(), iv, true, h); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2*iv + iv/2)
		for range 2 {
			_, before, _ := l.stats()
			l.killNext()
			awaitDrop(t, l, before)
		}
		noLoss(t, h.err, "two silent deaths")
		l.mu.Lock()
		hung := l.hung
		l.mu.Unlock()
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(hung) != 2 || len(h.at) != 2 {
			t.Fatalf("%d calls hung, %d second attempts due, want 2 of each", len(hung), len(h.at))
		}
		for i := range hung {
			if wait := h.at[i].Sub(hung[i]); wait < iv/2 || wait > iv/2+50*time.Millisecond {
				t.Errorf("death %d: the second attempt was due %v after the hung call, want half the interval, %v", i+1, wait, iv/2)
			}
		}
	})
}
