package backend

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

var (
	//go:embed scripts/raise.lua
	raiseSrc    string
	raiseScript = NewScript(raiseSrc)
)

// Quorum is the Backend of quorum mode (the Redlock algorithm): it fans every
// call out to N independent Redis backends concurrently, and a call succeeds
// when a majority (N/2+1) of them confirm it.
//
//   - Acquire holds the name when a majority set it. Its fence is the
//     largest of the fences the majority handed out; when they differ, every
//     node of the majority raises its counter to it (raise.lua, a second
//     round trip) before the acquire counts, so that the next acquisition,
//     whose majority meets this one, gets a larger fence. An attempt that
//     cannot reach a majority abandons what it set, on every node.
//   - Renew succeeds for an item when a majority renewed it, and reports it
//     not held when more than N - majority nodes say so (no majority can
//     hold it any more); anything in between is an unknown outcome.
//   - Release goes to every node; it succeeds when a majority deleted it.
//
// Calls return as soon as their outcome is decided: nodes that answer later
// (a paused or partitioned node) are not waited for. Their requests run on
// in the background until they end, their bound passes, or Close; a late
// acquire of a failed attempt is abandoned on its node.
//
// Reentrant locks, semaphores' permits and fair queues are not supported:
// Acquire, Leave and Reenter refuse them with errors.ErrUnsupported.
type Quorum struct {
	nodes  []*Redis
	linger time.Duration

	ctx    context.Context // cancelled by Close: ends the stragglers
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewQuorum returns a Quorum over nodes. linger bounds each node's request
// (an acquire's also by its TTL), whether or not the call waits for it.
func NewQuorum(nodes []*Redis, linger time.Duration) *Quorum {
	ctx, cancel := context.WithCancel(context.Background())
	return &Quorum{nodes: nodes, linger: linger, ctx: ctx, cancel: cancel}
}

// Majority is how many nodes must confirm a call: N/2+1.
func (q *Quorum) Majority() int { return len(q.nodes)/2 + 1 }

// Close ends the requests still running for calls that returned without
// them, and waits for their goroutines.
func (q *Quorum) Close() {
	q.cancel()
	q.wg.Wait()
}

// fanout runs op(ctx, i) for every node i in nodes, each in a goroutine of
// its own and bounded by ctx and limit, and hands collect each node as its op
// returns, until collect reports the outcome decided, every node answered,
// or ctx ends. A node that answers after that calls late(i), if late is not
// nil, in its own goroutine.
func (q *Quorum) fanout(ctx context.Context, nodes []int, limit time.Duration,
	op func(ctx context.Context, i int), collect func(i int) bool, late func(i int)) {
	ch := make(chan int, len(nodes))
	var (
		mu      sync.Mutex
		decided bool
	)
	for _, i := range nodes {
		q.wg.Add(1)
		go func() {
			defer q.wg.Done()
			nctx, cancel := context.WithTimeout(ctx, limit)
			stop := context.AfterFunc(q.ctx, cancel)
			op(nctx, i)
			stop()
			cancel()
			mu.Lock()
			if !decided {
				ch <- i // buffered for every node: never blocks
				mu.Unlock()
				return
			}
			mu.Unlock()
			if late != nil {
				late(i)
			}
		}()
	}
wait:
	for range nodes {
		select {
		case i := <-ch:
			if collect(i) {
				break wait
			}
		case <-ctx.Done():
			break wait
		}
	}
	mu.Lock()
	decided = true
	var uncollected []int
	for len(ch) > 0 {
		uncollected = append(uncollected, <-ch)
	}
	mu.Unlock()
	if late != nil {
		for _, i := range uncollected {
			q.wg.Add(1)
			go func() {
				defer q.wg.Done()
				late(i)
			}()
		}
	}
}

func (q *Quorum) all() []int {
	idx := make([]int, len(q.nodes))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// Acquire sets the name on every node and holds it if a majority did.
func (q *Quorum) Acquire(ctx context.Context, req Request) (Acquisition, error) {
	if req.Owner != "" || req.Queue > 0 || req.Limit > 0 {
		return Acquisition{}, fmt.Errorf("quorum mode: reentrant locks, semaphores and fair queues: %w", errors.ErrUnsupported)
	}
	a := &quorumAttempt{q: q, req: req, res: make([]Acquisition, len(q.nodes)), errs: make([]error, len(q.nodes)),
		final: make(chan struct{}),
		// A node's answer is of use only within the TTL, and the caller's
		// context may have no deadline at all.
		limit: min(req.TTL, q.linger)}
	defer close(a.final)
	a.ask(ctx)
	if len(a.acquired) < q.Majority() {
		a.giveUp()
		return a.refusal(ctx)
	}
	fence, err := a.confirmFence(ctx)
	if err != nil {
		a.giveUp()
		return Acquisition{}, err
	}
	a.granted = true
	return Acquisition{Acquired: true, Fence: fence}, nil
}

// quorumAttempt is one Quorum.Acquire: the nodes' answers as they come, and
// what a node that answers after the call returned must do.
type quorumAttempt struct {
	q     *Quorum
	req   Request
	limit time.Duration // bounds each node's request

	res                       []Acquisition // by node
	errs                      []error       // by node
	acquired, refused, failed []int         // nodes, in the order they answered

	// Whether the attempt was granted is known once Acquire returns
	// (final is closed); nodes that answer later wait for it to know what
	// to do.
	final   chan struct{}
	granted bool
}

// ask sends the request to every node and collects answers until a
// majority acquired or can no longer.
func (a *quorumAttempt) ask(ctx context.Context) {
	q := a.q
	n, maj := len(q.nodes), q.Majority()
	q.fanout(ctx, q.all(), a.limit, func(ctx context.Context, i int) {
		a.res[i], a.errs[i] = q.nodes[i].Acquire(ctx, a.req)
	}, func(i int) bool {
		switch {
		case a.errs[i] != nil:
			a.failed = append(a.failed, i)
		case a.res[i].Acquired:
			a.acquired = append(a.acquired, i)
		default:
			a.refused = append(a.refused, i)
		}
		return len(a.acquired) >= maj || len(a.refused)+len(a.failed) > n-maj
	}, func(i int) {
		<-a.final
		if !a.granted {
			a.cleanUp(i)
		}
	})
}

// cleanUp abandons the request on node i, unless it is known to have
// refused it.
func (a *quorumAttempt) cleanUp(i int) {
	if a.errs[i] == nil && !a.res[i].Acquired {
		return
	}
	ctx, cancel := context.WithTimeout(a.q.ctx, a.q.linger)
	defer cancel()
	_ = a.q.nodes[i].Abandon(ctx, a.req)
}

// giveUp abandons the request, in the background, on every node that took
// it or may have.
func (a *quorumAttempt) giveUp() {
	for _, i := range append(a.acquired, a.failed...) {
		a.q.wg.Add(1)
		go func() {
			defer a.q.wg.Done()
			a.cleanUp(i)
		}()
	}
}

// refusal is the outcome of an attempt that no majority acquired.
func (a *quorumAttempt) refusal(ctx context.Context) (Acquisition, error) {
	if len(a.refused) == 0 {
		return Acquisition{}, a.q.shortError(ctx, "acquired", len(a.acquired), a.errs, a.failed)
	}
	// Held elsewhere (or split between attempts): wait and try again, as
	// for a held name.
	wait := time.Duration(-1)
	for _, i := range a.refused {
		if t := a.res[i].HolderTTL; t >= 0 && (wait < 0 || t < wait) {
			wait = t
		}
	}
	return Acquisition{HolderTTL: wait}, nil
}

// confirmFence returns the attempt's fence, the largest the majority handed
// out, once a majority hands it out: nodes that gave a smaller one raise
// their counters to it (raise.lua).
func (a *quorumAttempt) confirmFence(ctx context.Context) (int64, error) {
	q := a.q
	n, maj := len(q.nodes), q.Majority()
	fence, ok, need := q.fenceOf(a.acquired, a.res)
	if ok >= maj {
		return fence, nil
	}
	var (
		raised = make([]error, n)
		rerrs  []error
	)
	q.fanout(ctx, need, a.limit, func(ctx context.Context, i int) {
		var held int64
		held, raised[i] = raiseScript.Run(ctx, q.nodes[i].client,
			[]string{q.nodes[i].layout.Lease(a.req.Name), q.nodes[i].layout.Fence(a.req.Name)}, a.req.Token, fence, ms(a.req.TTL)).Int64()
		if raised[i] == nil && held != 1 {
			raised[i] = ErrNotHeld
		}
	}, func(i int) bool {
		if raised[i] == nil {
			ok++
		} else {
			rerrs = append(rerrs, raised[i])
		}
		return ok >= maj
	}, nil)
	if ok < maj {
		return 0, fmt.Errorf("quorum: fence %d confirmed by %d of %d nodes, %d needed: %w",
			fence, ok, n, maj, errors.Join(append(rerrs, context.Cause(ctx))...))
	}
	return fence, nil
}

// fenceOf returns the largest fence among the acquired nodes, how many
// already hand it out, and the others, which must raise their counters.
func (q *Quorum) fenceOf(acquired []int, res []Acquisition) (fence int64, ok int, need []int) {
	for _, i := range acquired {
		fence = max(fence, res[i].Fence)
	}
	for _, i := range acquired {
		if res[i].Fence == fence {
			ok++
		} else {
			need = append(need, i)
		}
	}
	return fence, ok, need
}

// shortError describes a call that fewer than a majority confirmed and no
// majority refused: its outcome is unknown.
func (q *Quorum) shortError(ctx context.Context, what string, got int, errs []error, failed []int) error {
	var es []error
	for _, i := range failed {
		es = append(es, errs[i])
	}
	if len(es) == 0 {
		if err := context.Cause(ctx); err != nil {
			es = append(es, err)
		} else {
			es = append(es, errors.New("no answer in time"))
		}
	}
	return fmt.Errorf("quorum: %s on %d of %d nodes, %d needed: %w", what, got, len(q.nodes), q.Majority(), errors.Join(es...))
}

// Renew renews every item on every node; an item is renewed when a
// majority renewed it.
func (q *Quorum) Renew(ctx context.Context, items []Item, errs []error) {
	q.many(ctx, "renewed", items, errs, (*Redis).Renew)
}

// Release releases every item on every node; an item is released when a
// majority deleted it, not held when more than N - majority nodes did not
// have it.
func (q *Quorum) Release(ctx context.Context, items []Item, errs []error) {
	q.many(ctx, "released", items, errs, (*Redis).Release)
}

// many fans a batch out and decides each item by majority.
func (q *Quorum) many(ctx context.Context, what string, items []Item, errs []error, op func(*Redis, context.Context, []Item, []error)) {
	if len(items) != len(errs) {
		panic("backend: len(items) != len(errs)")
	}
	if len(items) == 0 {
		return
	}
	// A node that has not answered when the majority has goes on in its
	// goroutine after many returns, while the caller may reuse items (the
	// watchdog's renewer pools its batches): it reads a copy.
	items = slices.Clone(items)
	n, maj := len(q.nodes), q.Majority()
	per := make([][]error, n)
	ok := make([]int, len(items))
	notHeld := make([]int, len(items))
	other := make([]error, len(items))
	decided := func(j int) bool { return ok[j] >= maj || notHeld[j] > n-maj }
	undecided := len(items)
	q.fanout(ctx, q.all(), q.linger, func(ctx context.Context, i int) {
		e := make([]error, len(items))
		op(q.nodes[i], ctx, items, e)
		per[i] = e
	}, func(i int) bool {
		for j, err := range per[i] {
			before := decided(j)
			switch {
			case err == nil:
				ok[j]++
			case errors.Is(err, ErrNotHeld):
				notHeld[j]++
			case other[j] == nil:
				other[j] = err
			}
			if !before && decided(j) {
				undecided--
			}
		}
		return undecided == 0
	}, nil)
	for j := range items {
		switch {
		case ok[j] >= maj:
			errs[j] = nil
		case notHeld[j] > n-maj:
			errs[j] = ErrNotHeld
		default:
			cause := other[j]
			if cause == nil {
				cause = context.Cause(ctx)
			}
			if cause == nil {
				cause = errors.New("no answer in time")
			}
			errs[j] = fmt.Errorf("quorum: %s on %d of %d nodes (%d not held), %d needed: %w", what, ok[j], n, notHeld[j], maj, cause)
		}
	}
}

// Abandon abandons the request on every node.
func (q *Quorum) Abandon(ctx context.Context, req Request) error {
	errs := make([]error, len(q.nodes))
	var failed []int
	answered := 0
	q.fanout(ctx, q.all(), q.linger, func(ctx context.Context, i int) {
		errs[i] = q.nodes[i].Abandon(ctx, req)
	}, func(i int) bool {
		answered++
		if errs[i] != nil {
			failed = append(failed, i)
		}
		return false
	}, nil)
	if answered == len(q.nodes) && len(failed) == 0 {
		return nil
	}
	return q.shortError(ctx, "abandoned", answered-len(failed), errs, failed)
}

// Leave is not supported: quorum mode has no fair queue.
func (q *Quorum) Leave(context.Context, Request) error {
	return fmt.Errorf("quorum mode: fair queues: %w", errors.ErrUnsupported)
}

// Reenter is not supported: quorum mode has no reentrant locks.
func (q *Quorum) Reenter(context.Context, Item) (int64, error) {
	return 0, fmt.Errorf("quorum mode: reentrant locks: %w", errors.ErrUnsupported)
}
