package backend

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/renew_node.lua
	renewNodeSrc    string
	renewNodeScript = NewScript(renewNodeSrc)
)

// errNotLocal is a lease's outcome in a renew_node.lua call that could not
// reach its key: the node no longer serves its slot (a migration since the
// grouping), or the key has moved out of a slot the node is MIGRATING, or
// the key raised some other error. Unknown: renewBatched renews the lease
// again in a call that declares its key, which follows the slot (recheck).
var errNotLocal = errors.New("renewal sent to a Cluster node that no longer serves the lease's slot")

// errCounterAway is a lease's outcome in a renew_node.lua call that renewed
// its key but could not reach its counter on that node (refreshCounters).
// It never leaves renewBatched.
var errCounterAway = errors.New("lease renewed; its fence counter is on another Cluster node")

// renewBatchMax bounds the leases one renew_leases.lua call renews: Redis
// runs nothing else while a script runs, so a call of a few hundred leases
// (well under a millisecond) keeps other clients' latency small, and still
// pays one script call's overhead for all of them.
const renewBatchMax = 256

// A renewCall is one command of a renewal pipeline: one renew_leases.lua
// call for several leases of one node (a slot, in a Cluster without
// renew_node.lua) and TTL, one renew_node.lua call for several leases of one
// Cluster node and TTL, or one renew.lua call for one item of any kind.
type renewCall struct {
	idx   []int // the items it renews, by index into the Renew call's items
	batch bool
	node  bool   // renew_node.lua
	addr  string // on a Cluster: the primary it goes to, as the client's slot map says
	keys  []string
	args  []any
	cmd   *redis.Cmd
	// A batch call's lease keys and tokens, the counters to refresh and
	// the place (1..) of the lease of each, until built.
	leases []string
	tokens []any
	fences []string
	of     []any
}

// add appends item i, the plain lease it of key, to the batch call.
func (c *renewCall) add(i int, key string, it Item, layout Layout) {
	c.idx = append(c.idx, i)
	c.leases = append(c.leases, key)
	c.tokens = append(c.tokens, it.Token)
	if !it.Light {
		// In the order of the leases: the scripts walk both lists
		// together.
		c.fences = append(c.fences, layout.Fence(it.Name))
		c.of = append(c.of, len(c.idx))
	}
}

// build lays a batch call's keys and arguments out as its script reads
// them (renew_leases.lua: every key declared; renew_node.lua: the first
// alone, the others as arguments).
func (c *renewCall) build() {
	n := len(c.idx)
	if !c.node {
		c.keys = append(append(c.keys, c.leases...), c.fences...)
		c.args = append(append(append(c.args, n), c.tokens...), c.of...)
		return
	}
	c.keys = append(c.keys, c.leases[0])
	c.args = append(c.args, n)
	for _, k := range c.leases {
		c.args = append(c.args, k)
	}
	c.args = append(append(c.args, c.tokens...), len(c.fences))
	for j, f := range c.fences {
		c.args = append(c.args, f, c.of[j])
	}
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
	sent := time.Now()
	calls := r.renewCalls(ctx, items)
	r.sendRenewals(ctx, r.reachable(ctx, calls))
	retry, unproven, reload := r.outcomes(calls, errs)
	// A node that cannot be reached may have been replaced: on a Cluster
	// whose primary died, its replica is promoted within seconds, and the
	// renewals retried before the lease's deadline must go there. go-redis
	// reloads its slot map by itself only every 10s, which a 10s TTL does
	// not survive.
	if reload {
		r.reloadState(ctx)
	}
	if len(unproven) > 0 {
		r.recheck(ctx, items, errs, unproven)
	}
	r.refreshCounters(ctx, items, errs, sent)
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

// outcomes writes each call's answers into errs. It returns the items to
// renew again with renew.lua (those of batch calls the server could not
// run), those to renew again one by one with renew_node.lua (those whose
// answer proves nothing: unproven), and whether the Cluster client should
// reload its slot map: a node could not be reached, or did not serve a
// lease's slot.
func (r *Redis) outcomes(calls []*renewCall, errs []error) (retry, unproven []int, reload bool) {
	for _, c := range calls {
		switch err := c.cmd.Err(); {
		case c.batch && batchUnsupported(err):
			r.noBatch.Store(true)
			retry = append(retry, c.idx...)
			continue
		case c.node && nodeUnsupported(err):
			// A server without script flags (before 7.0) cannot
			// run renew_node.lua: batch by slot from now on.
			r.noNodeBatch.Store(true)
			retry = append(retry, c.idx...)
			continue
		}
		c.results(errs)
		if c.node {
			u := c.unproven(errs)
			reload = reload || slices.ContainsFunc(u, func(i int) bool { return errs[i] == errNotLocal })
			unproven = append(unproven, u...)
		}
		if transportFailure(c.cmd.Err()) {
			reload = true
			if c.addr != "" && !errors.Is(c.cmd.Err(), errNodeDown) {
				r.down.mark(c.addr)
			}
		}
	}
	return retry, unproven, reload
}

// recheck renews each of the items idx, plain leases, in a renew_node.lua
// call of its own, which declares the lease's key: Redis routes the call by
// it and checks it as a migration requires (go-redis follows MOVED and
// ASK), so the answer decides. A lease's key and counter may be on two
// nodes while their slot migrates, and one call that declares both (as
// renew.lua does) is then refused TRYAGAIN, by the importing node, until
// the slot's other keys have moved. This call declares one key, never
// refused so, and the counter, which the script reaches with pcall, is
// refreshed after it where it is not on that node (-3, refreshCounters).
func (r *Redis) recheck(ctx context.Context, items []Item, errs []error, idx []int) {
	calls := make([]*renewCall, len(idx))
	for k, i := range idx {
		c := &renewCall{batch: true, node: true, args: []any{msArg(&r.ttlArg, items[i].TTL)}}
		c.add(i, r.layout.Lease(items[i].Name), items[i], r.layout)
		c.build()
		calls[k] = c
	}
	r.sendRenewals(ctx, calls)
	for _, c := range calls {
		c.results(errs)
		r.reloadIfUnreachable(ctx, c.cmd.Err())
	}
}

// refreshCounters refreshes the counters of the leases that a renew_node.lua
// call renewed but whose counters it could not reach (errCounterAway), and
// reports those leases renewed: their keys were, whatever comes of their
// counters. A counter alone moved out of a MIGRATING slot is such a one:
// the node still serves the lease's key, and refuses the script the
// counter's. A PEXPIRE of its own is routed by the counter's key, and
// go-redis follows the node's ASK to the importing node, which has it. It
// gives the counter what the script would have, twice the TTL, less the
// time since the call was sent: no more than a script run at the sending
// would have given, and as much as the watchdog counts on until the next
// full renewal (watchdog.Renewal.Light). Should it fail too, the lease
// still stands; the counter may lapse before a later full renewal reaches
// it, and the next acquisition re-seeds it from the clock (S5).
func (r *Redis) refreshCounters(ctx context.Context, items []Item, errs []error, sent time.Time) {
	var away []int
	for i, err := range errs {
		if err == errCounterAway {
			errs[i] = nil
			away = append(away, i)
		}
	}
	if len(away) == 0 {
		return
	}
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, i := range away {
			if left := 2*items[i].TTL - time.Since(sent); left > 0 {
				cmd := redis.NewIntCmd(ctx, "pexpire", r.layout.Fence(items[i].Name), ms(left), "gt")
				cmd.SetFirstKeyPos(1) // routed by the counter's slot, whatever go-redis knows of PEXPIRE
				_ = p.Process(ctx, cmd)
			}
		}
		return nil
	})
	r.reloadIfUnreachable(ctx, err)
}

// renewCalls groups items into calls.
func (r *Redis) renewCalls(ctx context.Context, items []Item) []*renewCall {
	type group struct {
		slot int
		node string
		ttl  time.Duration
	}
	byNode := r.batch == batchSlots && !r.noNodeBatch.Load()
	nodes := map[int]string{} // slot -> the address of its primary, looked up once a call
	open := map[group]*renewCall{}
	var calls []*renewCall
	for i, it := range items {
		if it.Reentrant || it.Permit {
			keys, argv := r.renewArgs(it)
			c := &renewCall{idx: []int{i}, keys: keys, args: append([]any(nil), argv.slice()...)}
			if r.batch == batchSlots {
				c.addr = r.nodeOf(ctx, nodes, slot(keys[0]), keys[0])
			}
			calls = append(calls, c)
			continue
		}
		key := r.layout.Lease(it.Name)
		g := group{ttl: it.TTL}
		if r.batch == batchSlots {
			// The slot of the key, not of the name: a name's own braces
			// ("x{t}") pick a tag other than the key's ("x{t").
			g.slot = slot(key)
			g.node = r.nodeOf(ctx, nodes, g.slot, key)
			if byNode {
				g.slot = 0
			}
		}
		c := open[g]
		if c == nil || len(c.idx) == renewBatchMax {
			c = &renewCall{batch: true, node: byNode, addr: g.node, args: []any{msArg(&r.ttlArg, it.TTL)}}
			open[g] = c
			calls = append(calls, c)
		}
		c.add(i, key, it, r.layout)
	}
	for _, c := range calls {
		if c.batch {
			c.build()
		}
	}
	return calls
}

// nodeOf returns the address of the primary that serves key's slot, as the
// Cluster client last saw it, remembering it in nodes for the call. A slot
// the client cannot place gets a group of its own ("slot N").
func (r *Redis) nodeOf(ctx context.Context, nodes map[int]string, s int, key string) string {
	if addr, ok := nodes[s]; ok {
		return addr
	}
	addr := fmt.Sprint("slot ", s)
	if cc, ok := r.client.(*redis.ClusterClient); ok {
		if c, err := cc.MasterForKey(ctx, key); err == nil {
			addr = c.Options().Addr
		}
	}
	nodes[s] = addr
	return addr
}

// reachable returns the calls to send: those whose Cluster node is not
// down (downNodes). The others are answered errNodeDown at once, so that
// the live nodes' renewals do not wait for a dead one's dials.
func (r *Redis) reachable(ctx context.Context, calls []*renewCall) []*renewCall {
	if r.batch != batchSlots {
		return calls
	}
	out := calls[:0:0]
	for _, c := range calls {
		if c.addr != "" && r.down.skip(ctx, c.addr, r.dial) {
			c.cmd = redis.NewCmd(ctx)
			c.cmd.SetErr(errNodeDown)
			continue
		}
		out = append(out, c)
	}
	return out
}

// sendRenewals sends the calls in one pipeline, and once more with EVAL
// those the server answered NOSCRIPT (after a restart or SCRIPT FLUSH).
func (r *Redis) sendRenewals(ctx context.Context, calls []*renewCall) {
	send := func(cs []*renewCall, eval bool) {
		_, _ = r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, c := range cs {
				s := renewScript
				switch {
				case c.node:
					s = renewNodeScript
				case c.batch:
					s = renewLeasesScript
				}
				s.Load(ctx, r.client, c.keys[0]) // no SCRIPT LOAD once known
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
		switch failed[k+1] {
		case -1:
			errs[i] = ErrGone
		case -2:
			errs[i] = errNotLocal
		case -3:
			errs[i] = errCounterAway
		default:
			errs[i] = ErrNotHeld
		}
	}
}

// unproven returns the items of a renew_node.lua call whose answer proves
// nothing of them. A lease the call found free (ErrGone): while its slot
// migrates, the call may have been redirected (ASK) to the importing node,
// which runs it under ASKING and reads a key not yet moved there as
// missing, although the source still holds it with its token. A lease the
// call could not reach (errNotLocal): its slot moved since the grouping,
// or its key moved out of a slot the node is MIGRATING, which Redis
// refuses a script to touch there; until the migration ends the client's
// slot map still sends every call to that node. Only the first lease's key
// is declared, so Redis's own checks (ASK) cover it alone: each of these
// is renewed again in a call that declares its key (recheck).
func (c *renewCall) unproven(errs []error) []int {
	var out []int
	for _, i := range c.idx {
		if errs[i] == ErrGone || errs[i] == errNotLocal {
			out = append(out, i)
		}
	}
	return out
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
	_, ok := replyOf(err)
	return ok && strings.Contains(strings.ToLower(err.Error()), "wrong number of arg")
}

// nodeUnsupported reports whether a renew_node.lua call failed because the
// server cannot run it: before Redis 7.0 a script's first line "#!lua" is
// a syntax error, and flags are unknown.
func nodeUnsupported(err error) bool {
	if _, ok := replyOf(err); !ok {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "near '#'") || strings.Contains(msg, "shebang") || strings.Contains(msg, "flag")
}

// transportFailure reports whether err is a failure to reach a server
// rather than its reply (redis.Error) or the caller's context ending.
func transportFailure(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	_, reply := replyOf(err)
	return !reply
}

// replyOf returns the server's error reply that err is or wraps, and
// whether there is one. Every acquire and release asks (through
// transportFailure), nearly always of nil: errors.As makes its target
// escape, so the target is declared only past that case, or each call would
// allocate (TestErrorChecksOfNilAllocateNothing).
func replyOf(err error) (redis.Error, bool) {
	if err == nil {
		return nil, false
	}
	var re redis.Error
	ok := errors.As(err, &re)
	return re, ok
}

// reloadIfUnreachable reloads a Cluster client's slot map after err, a
// failure to reach a node (see renewBatched): the next attempt then goes to
// whichever node serves the slot now.
func (r *Redis) reloadIfUnreachable(ctx context.Context, err error) {
	if transportFailure(err) {
		r.reloadState(ctx)
	}
}

// reloadState has a Cluster client load its slot map again (go-redis does
// it in the background, at most once every 200ms).
func (r *Redis) reloadState(ctx context.Context) {
	if cc, ok := r.client.(*redis.ClusterClient); ok {
		cc.ReloadState(ctx)
	}
}

// batching reports whether renewals may be batched.
func (r *Redis) batching() bool { return r.batch != batchNone && !r.noBatch.Load() }
