package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// renewBatchMax bounds the leases one renew_leases.lua call renews: Redis
// runs nothing else while a script runs, so a call of a few hundred leases
// (well under a millisecond) keeps other clients' latency small, and still
// pays one script call's overhead for all of them.
const renewBatchMax = 256

// A renewCall is one command of a renewal pipeline: one renew_leases.lua
// call for several leases of one node and TTL, or one renew.lua call for
// one item of any kind.
type renewCall struct {
	idx   []int // the items it renews, by index into the Renew call's items
	batch bool
	keys  []string
	args  []any
	cmd   *redis.Cmd
	// A batch call's counters to refresh, and the place (1..) of the
	// lease of each: sent after the lease keys and tokens.
	fences []string
	of     []any
}

// batchMode says how a client's leases may share a renew_leases.lua call.
type batchMode uint8

const (
	batchNone  batchMode = iota // one renew.lua call per item (a Ring, an unknown client)
	batchAll                    // one server: any leases (a Client, a Sentinel failover client)
	batchSlots                  // a Cluster: leases of one slot
)

func batchModeOf(c redis.UniversalClient) batchMode {
	switch c.(type) {
	case *redis.Client:
		return batchAll
	case *redis.ClusterClient:
		return batchSlots
	}
	return batchNone
}

// renewBatched is Renew without replica acknowledgement: plain leases in
// renew_leases.lua calls of up to renewBatchMax leases that share a node
// (a slot, in a Cluster) and a TTL, every other item in its own renew.lua
// call, all in one pipeline (go-redis splits a Cluster's per node).
func (r *Redis) renewBatched(ctx context.Context, items []Item, errs []error) {
	calls := r.renewCalls(items)
	r.sendRenewals(ctx, calls)
	var retry []int // items of batch calls the server could not run
	for _, c := range calls {
		if c.batch && batchUnsupported(c.cmd.Err()) {
			r.noBatch.Store(true)
			retry = append(retry, c.idx...)
			continue
		}
		c.results(errs)
	}
	if len(retry) > 0 {
		sub := make([]Item, len(retry))
		subErrs := make([]error, len(retry))
		for k, i := range retry {
			sub[k] = items[i]
		}
		r.pipelined(ctx, renewScript, sub, subErrs, r.renewArgs, renewResult)
		for k, i := range retry {
			errs[i] = subErrs[k]
		}
	}
}

// renewCalls groups items into calls.
func (r *Redis) renewCalls(items []Item) []*renewCall {
	type group struct {
		slot int
		ttl  time.Duration
	}
	open := map[group]*renewCall{}
	var calls []*renewCall
	for i, it := range items {
		if it.Reentrant || it.Permit {
			keys, argv := r.renewArgs(it)
			calls = append(calls, &renewCall{idx: []int{i}, keys: keys, args: append([]any(nil), argv.slice()...)})
			continue
		}
		key := r.layout.Lease(it.Name)
		g := group{ttl: it.TTL}
		if r.batch == batchSlots {
			// The slot of the key, not of the name: a name's own braces
			// ("x{t}") pick a tag other than the key's ("x{t").
			g.slot = slot(key)
		}
		c := open[g]
		if c == nil || len(c.idx) == renewBatchMax {
			c = &renewCall{batch: true, args: []any{msArg(&r.ttlArg, it.TTL), nil}}
			open[g] = c
			calls = append(calls, c)
		}
		c.idx = append(c.idx, i)
		c.keys = append(c.keys, key)
		c.args = append(c.args, it.Token)
		if !it.Light {
			c.fences = append(c.fences, r.layout.Fence(it.Name))
			c.of = append(c.of, len(c.idx))
		}
	}
	for _, c := range calls {
		if c.batch {
			c.args[1] = len(c.idx)
			c.keys = append(c.keys, c.fences...)
			c.args = append(c.args, c.of...)
		}
	}
	return calls
}

// sendRenewals sends the calls in one pipeline, and once more with EVAL
// those the server answered NOSCRIPT (after a restart or SCRIPT FLUSH).
func (r *Redis) sendRenewals(ctx context.Context, calls []*renewCall) {
	send := func(cs []*renewCall, eval bool) {
		_, _ = r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, c := range cs {
				s := renewScript
				if c.batch {
					s = renewLeasesScript
				}
				c.cmd = s.command(ctx, eval, c.keys, c.args...)
				_ = p.Process(ctx, c.cmd)
			}
			return nil
		})
	}
	send(calls, false)
	var missing []*renewCall
	for _, c := range calls {
		if err := c.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		send(missing, true)
	}
}

// results writes the call's outcome for each of its items into errs.
func (c *renewCall) results(errs []error) {
	if !c.batch {
		errs[c.idx[0]] = renewResult(c.cmd)
		return
	}
	failed, err := c.cmd.Int64Slice()
	if err == nil && !validFailures(failed, len(c.idx)) {
		err = fmt.Errorf("renew_leases.lua: unexpected reply %v", failed)
	}
	for _, i := range c.idx {
		errs[i] = err
	}
	if err != nil {
		return
	}
	for k := 0; k < len(failed); k += 2 {
		i := c.idx[failed[k]-1]
		errs[i] = ErrNotHeld
		if failed[k+1] == -1 {
			errs[i] = ErrGone
		}
	}
}

// validFailures reports whether failed is renew_leases.lua's answer for a
// call of n leases: pairs of a lease's place (1..n) and a code.
func validFailures(failed []int64, n int) bool {
	if len(failed)%2 != 0 {
		return false
	}
	for k := 0; k < len(failed); k += 2 {
		if failed[k] < 1 || failed[k] > int64(n) {
			return false
		}
	}
	return true
}

// batchUnsupported reports whether a renew_leases.lua call failed because
// the server cannot run it: Redis before 7.0 has no PEXPIRE ... GT, and
// refuses the script's PEXPIRE for its number of arguments ("Wrong number
// of args calling Redis command From Lua script" in 6.2; "wrong number of
// arguments for 'pexpire'" from the command itself). The script calls
// nothing else that could be refused so. Any other failure (an outage, a
// refusal) would fail renew.lua too.
func batchUnsupported(err error) bool {
	var reply redis.Error
	return err != nil && errors.As(err, &reply) &&
		strings.Contains(strings.ToLower(err.Error()), "wrong number of arg")
}

// batching reports whether renewals may be batched.
func (r *Redis) batching() bool { return r.batch != batchNone && !r.noBatch.Load() }
