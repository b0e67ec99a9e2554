package backend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrTooFewReplicas is wrapped by the errors of an acquire or renewal that
// fewer replicas acknowledged than asked for (WithReplicaAcks).
var ErrTooFewReplicas = errors.New("too few replicas acknowledged the write")

// AckError is the error of an acquire or renewal that the server applied but
// too few replicas acknowledged within the timeout: a failover now could
// promote a replica that never heard of it.
type AckError struct {
	// Want is how many acknowledgements were asked for, Got how many came.
	Want, Got int64
	// Undone reports, for an acquire, that the lease it set was released
	// again (so the outcome is known: nothing is held).
	Undone bool
	// Err is the WAIT command's own error, if it failed.
	Err error
}

// Error says how many replicas acknowledged, of how many asked.
func (e *AckError) Error() string {
	s := fmt.Sprintf("%d of %d replicas acknowledged the write", e.Got, e.Want)
	if e.Err != nil {
		s += " (WAIT: " + e.Err.Error() + ")"
	}
	return s
}

// Unwrap returns ErrTooFewReplicas.
func (e *AckError) Unwrap() error { return ErrTooFewReplicas }

// SetReplicaAcks makes every acquire and renewal wait, in the same pipeline
// on the same connection, for n replicas to acknowledge it (WAIT n timeout).
// An acquire acknowledged by fewer is released again and fails with an
// AckError; a renewal acknowledged by fewer fails with an AckError, an
// unknown outcome that the watchdog retries until the lease's deadline.
// n = 0 turns it off. Call it before the backend is used.
func (r *Redis) SetReplicaAcks(n int, timeout time.Duration) {
	r.acks, r.ackTimeout = n, timeout
}

// nodeFor returns the client of the server holding key: the Cluster
// primary of its slot, or the client itself. WAIT counts the writes of
// the connection it is sent on, so it must follow the script there.
func (r *Redis) nodeFor(ctx context.Context, key string) (redis.Cmdable, error) {
	if cc, ok := r.client.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	return r.client, nil
}

// reloadOnRedirect refreshes a Cluster client's slot map after a node
// answered MOVED or ASK to a command sent straight to it.
func (r *Redis) reloadOnRedirect(ctx context.Context, err error) {
	if cc, ok := r.client.(*redis.ClusterClient); ok &&
		(redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")) {
		cc.ReloadState(ctx)
	}
}

// acquireAcked is Acquire followed by WAIT.
func (r *Redis) acquireAcked(ctx context.Context, s *Script, req Request, keys []string, args []any) (Acquisition, error) {
	c, err := r.nodeFor(ctx, keys[0])
	if err != nil {
		return Acquisition{}, fmt.Errorf("acquire: %w", err)
	}
	var (
		script *redis.Cmd
		wait   *redis.Cmd
	)
	run := func(eval bool) {
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			if eval {
				script = s.Eval(ctx, p, keys, args...)
			} else {
				script = s.EvalSha(ctx, p, keys, args...)
			}
			wait = p.Do(ctx, "WAIT", r.acks, r.ackTimeout.Milliseconds())
			return nil
		})
	}
	s.Load(ctx, r.client, keys[0])
	run(false)
	if err := script.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		run(true)
	}
	if err := script.Err(); err != nil {
		r.reloadOnRedirect(ctx, err)
	}
	res, err := acquisition(script)
	if err != nil || !res.Acquired {
		return res, err
	}
	got, werr := wait.Int64()
	if werr == nil && got >= int64(r.acks) {
		return res, nil
	}
	// Too few replicas have it: a failover could forget it, so it is not
	// a lease. Take back what this request added.
	ae := &AckError{Want: int64(r.acks), Got: got, Err: werr}
	it := req.Item()
	if it.Reentrant {
		// The one entry it made, under its entry mark's id, so that a
		// late copy of the request is refused after.
		it.Count, it.Op = 1, req.Token
	}
	errs := make([]error, 1)
	r.Release(ctx, []Item{it}, errs)
	ae.Undone = errs[0] == nil || errors.Is(errs[0], ErrNotHeld)
	return Acquisition{}, ae
}

// renewAcked is Renew with WAIT: one pipeline per server, each ending with
// WAIT, sent concurrently.
func (r *Redis) renewAcked(ctx context.Context, items []Item, errs []error) {
	if len(items) != len(errs) {
		panic("backend: len(items) != len(errs)")
	}
	groups := map[redis.Cmdable][]int{}
	for i, it := range items {
		c, err := r.nodeFor(ctx, r.layout.Lease(it.Name))
		if err != nil {
			errs[i] = err
			continue
		}
		groups[c] = append(groups[c], i)
	}
	var wg sync.WaitGroup
	for c, idx := range groups {
		wg.Go(func() { r.renewOn(ctx, c, items, idx, errs) })
	}
	wg.Wait()
}

// renewOn renews items[idx] on one server, each result in errs.
func (r *Redis) renewOn(ctx context.Context, c redis.Cmdable, items []Item, idx []int, errs []error) {
	cmds := make([]*redis.Cmd, len(idx))
	waits := make([]*redis.Cmd, len(idx)) // the WAIT that covers each command
	send := func(which []int, eval bool) {
		var wait *redis.Cmd
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range which {
				keys, argv := r.renewArgs(items[idx[k]])
				if eval {
					cmds[k] = renewScript.Eval(ctx, p, keys, argv.slice()...)
				} else {
					cmds[k] = renewScript.EvalSha(ctx, p, keys, argv.slice()...)
				}
			}
			wait = p.Do(ctx, "WAIT", r.acks, r.ackTimeout.Milliseconds())
			return nil
		})
		for _, k := range which {
			waits[k] = wait
		}
	}
	all := make([]int, len(idx))
	for k := range all {
		all[k] = k
	}
	renewScript.Load(ctx, r.client, r.layout.Lease(items[idx[0]].Name))
	send(all, false)
	var missing []int
	for k, cmd := range cmds {
		if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		send(missing, true)
	}
	for k, cmd := range cmds {
		err := renewResult(cmd)
		if err == nil {
			if got, werr := waits[k].Int64(); werr != nil || got < int64(r.acks) {
				err = &AckError{Want: int64(r.acks), Got: got, Err: werr}
			}
		} else {
			r.reloadOnRedirect(ctx, err)
		}
		errs[idx[k]] = err
	}
}
