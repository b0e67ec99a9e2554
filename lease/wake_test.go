package lease

import "testing"

// Whom a new barging request waits behind, and whom a release wakes, when
// requests of one manager ask for different things: a request must never
// wait behind those that cannot get in when it can (a permit of five is
// free while none of one is), and a release must reach one waiter of each
// such kind.
func TestWaitingAndWakingByLimit(t *testing.T) {
	lease := &waiter{limit: 0, wake: make(chan struct{}, 1)}
	one := &waiter{limit: 1, wake: make(chan struct{}, 1)}
	oneMore := &waiter{limit: 1, wake: make(chan struct{}, 1)}
	five := &waiter{limit: 5, wake: make(chan struct{}, 1)}
	fair := &waiter{fair: true, limit: 5, arrival: 1, wake: make(chan struct{}, 1)}
	n := &notifier{chans: map[string]*subscription{"ch": {waiters: []*waiter{one, oneMore}}}}

	for _, c := range []struct {
		limit int
		want  bool
	}{{0, false}, {1, true}, {5, false}} {
		if got := n.waiting("ch", c.limit); got != c.want {
			t.Errorf("with requests of 1 permit waiting, a request of %d waits behind them: %v, want %v", c.limit, got, c.want)
		}
	}
	n.chans["ch"].waiters = append(n.chans["ch"].waiters, five, lease)
	for _, c := range []struct {
		limit int
		want  bool
	}{{0, true}, {1, true}, {5, true}, {6, false}} {
		if got := n.waiting("ch", c.limit); got != c.want {
			t.Errorf("with requests of 0, 1 and 5 waiting, a request of %d waits behind them: %v, want %v", c.limit, got, c.want)
		}
	}

	s := &subscription{waiters: []*waiter{one, oneMore, five, lease, fair}}
	s.wakeOne()
	for _, c := range []struct {
		what string
		w    *waiter
		want bool
	}{{"the first of 1", one, true}, {"the second of 1", oneMore, false}, {"the first of 5", five, true},
		{"the first lease", lease, true}, {"the fair head", fair, true}} {
		if got := len(c.w.wake) == 1; got != c.want {
			t.Errorf("a release woke %s: %v, want %v", c.what, got, c.want)
		}
	}
}
