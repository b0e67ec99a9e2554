package backend

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/keys"
)

var (
	// fence.lua and queue.lua define functions that acquire.lua and
	// permit.lua call.
	//go:embed scripts/fence.lua
	fenceSrc string
	//go:embed scripts/queue.lua
	queueSrc string
	// letgo.lua defines the functions of letting go of a permit or a
	// place in the queue, which renew.lua, release.lua, abandon.lua and
	// leave.lua call; publish.lua and spublish.lua define publish(), which
	// letgo.lua's wake() and release.lua and downgrade.lua call
	// (pubsub.go).
	//go:embed scripts/letgo.lua
	letgoSrc string
	//go:embed scripts/acquire_lease.lua
	acquireLeaseSrc string
	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/permit.lua
	permitSrc string
	//go:embed scripts/renew.lua
	renewSrc string
	//go:embed scripts/renew_leases.lua
	renewLeasesSrc string
	//go:embed scripts/release_lease.lua
	releaseLeaseSrc string
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/abandon.lua
	abandonSrc string
	//go:embed scripts/leave.lua
	leaveSrc string
	//go:embed scripts/reenter.lua
	reenterSrc string
	//go:embed scripts/available.lua
	availableSrc string
	//go:embed scripts/downgrade.lua
	downgradeSrc string

	acquireScript     = NewScript(acquireLeaseSrc + fenceSrc + queueSrc + acquireSrc)
	permitScript      = NewScript(fenceSrc + queueSrc + permitSrc)
	renewScript       = NewScript(publishSrc + letgoSrc + renewSrc) // publishes nothing
	renewLeasesScript = NewScript(renewLeasesSrc)
	reenterScript     = NewScript(reenterSrc)
	availableScript   = NewScript(availableSrc)
)

// Layout is the key layout, kept in internal/keys with the name rules so
// that every user of a name's keys spells them alike.
type Layout = keys.Layout

// How long P{N}:retired markers live (their doc is in internal/keys).
const retiredFor = keys.RetiredFor

func retiredFree(ttl time.Duration) time.Duration { return keys.RetiredFree(ttl) }

// Redis is the Backend over one Redis deployment reached through a go-redis
// UniversalClient (a single server, a Sentinel failover client or a Cluster).
type Redis struct {
	client redis.UniversalClient
	layout Layout

	// Replica acknowledgement (acks.go): when acks > 0, acquire and renew
	// are followed by WAIT acks ackTimeout in the same pipeline.
	acks       int
	ackTimeout time.Duration

	// The TTL and the release marker's lifetime, boxed (msArg).
	ttlArg, freeArg atomic.Pointer[msBox]

	// How renewals of plain leases share renew_leases.lua calls
	// (renewbatch.go), and whether the server refused that script (older
	// than Redis 7.0): then every item is renewed with renew.lua.
	batch   batchMode
	noBatch atomic.Bool
	// noNodeBatch: the Cluster's servers cannot run renew_node.lua
	// (before Redis 7.0): renewals are batched by slot instead.
	noNodeBatch atomic.Bool

	// The scripts that publish release messages, built for the client's
	// kind of pub/sub (pubsub.go).
	pub *publishers

	// On a Cluster: the nodes renewals could not reach (down.go), and how
	// the client dials one.
	down downNodes
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// NewRedis returns a Redis backend storing keys under prefix.
func NewRedis(client redis.UniversalClient, prefix string) *Redis {
	return &Redis{client: client, layout: Layout{Prefix: prefix}, batch: batchModeOf(client), pub: publishersFor(client), dial: dialerOf(client)}
}

// Acquire runs acquire.lua (permit.lua for a permit): one round trip once
// the script is cached.
func (r *Redis) Acquire(ctx context.Context, req Request) (Acquisition, error) {
	if req.Limit > 0 {
		return r.acquirePermit(ctx, req)
	}
	keys := r.layout.AcquireKeys(req.Name, req.Token)
	ttl := msArg(&r.ttlArg, req.TTL)
	// A plain lease, the common case, passes two arguments.
	full := req.Owner != "" || req.Queue > 0
	if r.acks > 0 {
		args := []any{req.Token, ttl}
		if full {
			args = append(args, req.Owner, ms(req.Queue))
		}
		if req.Owner != "" {
			args = append(args, ms(retiredFree(req.TTL)))
		}
		return r.acquireAcked(ctx, acquireScript, req, keys, args)
	}
	n := 4
	if req.Owner != "" {
		n = 5 // a plain lease's slice keeps its size class
	}
	a := append(acquireScript.call(keys, n), req.Token, ttl)
	if full {
		a = append(a, req.Owner, ms(req.Queue))
	}
	if req.Owner != "" {
		// How long the entry mark lives (acquire.lua's ARGV[5]): no longer
		// than the TTL, as the hold it entered may be forgotten (S6).
		a = append(a, ms(retiredFree(req.TTL)))
	}
	res, err := acquisition(acquireScript.send(ctx, r.client, a))
	r.reloadIfUnreachable(ctx, err)
	return res, err
}

// acquirePermit runs permit.lua.
func (r *Redis) acquirePermit(ctx context.Context, req Request) (Acquisition, error) {
	if req.Owner != "" {
		return Acquisition{}, errors.New("backend: a permit request has no owner")
	}
	keys := r.layout.PermitKeys(req.Name, req.Token)
	resize := "0"
	if req.Resize {
		resize = "1"
	}
	args := []any{req.Token, msArg(&r.ttlArg, req.TTL), req.Limit, ms(req.Queue), resize}
	if k := weight(req.Permits); k != "" {
		args = append(args, k)
	}
	if r.acks > 0 {
		return r.acquireAcked(ctx, permitScript, req, keys, args)
	}
	return acquisition(permitScript.send(ctx, r.client, append(permitScript.call(keys, len(args)), args...)))
}

// isRedisTooOld reports whether err is what a Redis older than 6.2 answers
// to acquire.lua: SET's GET option is a syntax error there.
func isRedisTooOld(err error) bool {
	re, ok := replyOf(err)
	return ok && strings.Contains(re.Error(), "syntax error")
}

// acquisition parses acquire.lua's reply: a lease's fence alone (an
// integer), or an array.
func acquisition(cmd *redis.Cmd) (Acquisition, error) {
	v, err := cmd.Result()
	if err != nil {
		if isRedisTooOld(err) {
			return Acquisition{}, fmt.Errorf("acquire script: %w (tenure needs Redis 6.2 or later, for SET ... GET)", err)
		}
		return Acquisition{}, fmt.Errorf("acquire script: %w", err)
	}
	if f, ok := v.(int64); ok {
		if f <= 0 {
			return Acquisition{}, fmt.Errorf("acquire script: unexpected reply %d", f)
		}
		return Acquisition{Acquired: true, Fence: f, Count: 1}, nil
	}
	vals, err := cmd.Int64Slice()
	if err != nil {
		return Acquisition{}, fmt.Errorf("acquire script: %w", err)
	}
	switch {
	case len(vals) == 3 && vals[0] == 1:
		return Acquisition{Acquired: true, Fence: vals[1], Count: vals[2]}, nil
	case len(vals) == 2 && vals[0] == 0 && vals[1] == -2:
		return Acquisition{Retired: true, HolderTTL: -1}, nil
	case len(vals) == 3 && vals[0] == 0 && vals[1] == -3 && vals[2] > 0:
		return Acquisition{HeldLimit: int(vals[2]), HolderTTL: -1}, nil
	case len(vals) >= 2 && len(vals) <= 4 && vals[0] == 0:
		a := Acquisition{HolderTTL: time.Duration(vals[1]) * time.Millisecond}
		if vals[1] < 0 {
			a.HolderTTL = -1
		}
		if len(vals) >= 3 {
			a.Arrival = vals[2]
		}
		switch {
		case len(vals) == 4 && vals[3] == -3: // acquire.lua's: permits hold the name
			a.HeldByPermits = true
		case len(vals) == 4:
			a.Free = int(vals[3]) // permit.lua's
		}
		return a, nil
	}
	return Acquisition{}, fmt.Errorf("acquire script: unexpected reply %v", vals)
}

// Abandon runs abandon.lua.
func (r *Redis) Abandon(ctx context.Context, req Request) error {
	n := req.Name
	keys := []string{r.layout.Lease(n), r.layout.Retired(n, req.Token), r.layout.Queue(n), r.layout.QueueExpiry(n)}
	args := []any{req.Token, r.layout.Channel(n), ms(req.TTL), req.Owner}
	if req.Owner != "" {
		keys = append(keys, r.layout.Fence(n))
	}
	if req.Limit > 0 {
		keys = append(keys, r.layout.Permits(n))
		args = append(args, "z")
		if k := weight(req.Permits); k != "" {
			args = append(args, k)
		}
	}
	err := r.pub.abandon.Run(ctx, r.client, keys, args...).Err()
	if err != nil {
		return fmt.Errorf("abandon script: %w", err)
	}
	return nil
}

// Leave runs leave.lua.
func (r *Redis) Leave(ctx context.Context, req Request) error {
	n := req.Name
	keys := []string{r.layout.Lease(n), r.layout.Queue(n), r.layout.QueueExpiry(n)}
	args := []any{req.Token, r.layout.Channel(n)}
	if k := weight(req.Permits); k != "" {
		args = append(args, k)
	}
	if err := r.pub.leave.Run(ctx, r.client, keys, args...).Err(); err != nil {
		return fmt.Errorf("leave script: %w", err)
	}
	return nil
}

// Available runs available.lua: how many of n permits of the semaphore
// name are free, and the n it counts them of (the stored one while permits
// are held). It writes nothing.
func (r *Redis) Available(ctx context.Context, name string, n int) (free, limit int, err error) {
	keys := []string{r.layout.Lease(name), r.layout.Permits(name)}
	vals, err := availableScript.Run(ctx, r.client, keys, n).Int64Slice()
	if err != nil {
		return 0, 0, fmt.Errorf("available script: %w", err)
	}
	if len(vals) != 2 {
		return 0, 0, fmt.Errorf("available script: unexpected reply %v", vals)
	}
	return int(vals[0]), int(vals[1]), nil
}

// Downgrade runs downgrade.lua: the lease w (a writer's) becomes the
// permit req asks for (Limit is the readers' N) in one step, and its fence
// is returned. ErrNotHeld when w does not hold the name, or req was
// abandoned: nothing was touched. Any other error: the outcome is unknown.
func (r *Redis) Downgrade(ctx context.Context, w Item, req Request) (int64, error) {
	n := req.Name
	keys := []string{r.layout.Lease(n), r.layout.Fence(n), r.layout.Retired(n, req.Token), r.layout.Permits(n)}
	f, err := r.pub.downgrade.Run(ctx, r.client, keys, w.Token, req.Token, ms(req.TTL), req.Limit).Int64()
	switch {
	case err != nil:
		return 0, fmt.Errorf("downgrade script: %w", err)
	case f <= 0:
		return 0, ErrNotHeld
	}
	return f, nil
}

// Reenter runs reenter.lua.
func (r *Redis) Reenter(ctx context.Context, it Item) (int64, error) {
	keys := []string{r.layout.Lease(it.Name), r.layout.Retired(it.Name, it.op()), r.layout.Fence(it.Name)}
	n, err := reenterScript.Run(ctx, r.client, keys, it.Token, ms(it.TTL), ms(retiredFor)).Int64()
	switch {
	case err != nil:
		return 0, fmt.Errorf("reenter script: %w", err)
	case n == 0:
		return 0, ErrNotHeld
	}
	return n, nil
}

// Renew runs renew.lua for every item in one pipeline (go-redis splits a
// Cluster pipeline per node, one round trip each).
func (r *Redis) Renew(ctx context.Context, items []Item, errs []error) {
	switch {
	case r.acks > 0:
		r.renewAcked(ctx, items, errs)
	case len(items) > 1 && r.batching():
		r.renewBatched(ctx, items, errs)
	default:
		r.pipelined(ctx, renewScript, items, errs, r.renewArgs, renewResult)
	}
}

// renewArgs are renew.lua's keys and arguments for one item.
func (r *Redis) renewArgs(it Item) ([]string, scriptArgs) {
	ttl := msArg(&r.ttlArg, it.TTL)
	switch {
	case it.Reentrant:
		return []string{r.layout.Lease(it.Name), r.layout.Fence(it.Name)}, argsOf(it.Token, ttl, "h")
	case it.Permit:
		keys := []string{r.layout.Lease(it.Name), r.layout.Fence(it.Name), r.layout.Permits(it.Name)}
		if k := weight(it.Permits); k != "" {
			return keys, argsOf(it.Token, ttl, "z", k)
		}
		return keys, argsOf(it.Token, ttl, "z")
	}
	return []string{r.layout.Lease(it.Name), r.layout.Fence(it.Name)}, argsOf(it.Token, ttl, "")
}

// Release runs release.lua for every item in one pipeline.
func (r *Redis) Release(ctx context.Context, items []Item, errs []error) {
	r.pipelined(ctx, r.pub.release, items, errs, r.releaseArgs, scriptResult)
	if slices.ContainsFunc(errs, transportFailure) {
		r.reloadState(ctx)
	}
}

// ReleaseOne is Release of one item, without the slices (see ReleaseOne).
func (r *Redis) ReleaseOne(ctx context.Context, it Item) error {
	keys, args := r.releaseArgs(it)
	a := append(r.pub.release.call(keys, args.n), args.slice()...)
	err := scriptResult(r.pub.release.send(ctx, r.client, a))
	r.reloadIfUnreachable(ctx, err)
	return err
}

// releaseArgs are release.lua's keys and arguments for one item: a lease
// passes two arguments, which keeps the common release small.
func (r *Redis) releaseArgs(it Item) ([]string, scriptArgs) {
	keys := r.layout.ReleaseKeys(it.Name, it.op())
	free := msArg(&r.freeArg, it.memory())
	switch {
	case it.Permit:
		if k := weight(it.Permits); k != "" {
			return append(keys, r.layout.Permits(it.Name)), argsOf(it.Token, free, "z", k)
		}
		return append(keys, r.layout.Permits(it.Name)), argsOf(it.Token, free, "z")
	case !it.Reentrant:
		return keys, argsOf(it.Token, free)
	}
	args := argsOf(it.Token, free, strconv.Itoa(it.Count), ms(retiredFor))
	if it.Fence != 0 {
		keys = append(keys, r.layout.Fence(it.Name))
		args.add(strconv.FormatInt(it.Fence, 10))
	}
	return keys, args
}

// pipelined sends script once per item with EVALSHA in one pipeline, and
// once more with EVAL for the items the server answered NOSCRIPT (after a
// restart or SCRIPT FLUSH). Each script returns 1 (done) or 0 (not held).
func (r *Redis) pipelined(ctx context.Context, script *Script, items []Item, errs []error, args func(Item) ([]string, scriptArgs), result func(*redis.Cmd) error) {
	if len(items) != len(errs) {
		panic("backend: len(items) != len(errs)")
	}
	if len(items) == 0 {
		return
	}
	if len(items) == 1 {
		// One command needs no pipeline; Run retries NOSCRIPT with EVAL.
		keys, argv := args(items[0])
		errs[0] = result(script.send(ctx, r.client, append(script.call(keys, argv.n), argv.slice()...)))
		return
	}
	cmds := make([]*redis.Cmd, len(items))
	keys := make([][]string, len(items))
	argv := make([]scriptArgs, len(items))
	for i, it := range items {
		keys[i], argv[i] = args(it)
	}
	script.Load(ctx, r.client, keys[0][0])
	// The pipeline's own error repeats the first failed command's error;
	// every command carries its own, which is what we report.
	_, _ = r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range items {
			cmds[i] = script.command(ctx, false, keys[i], argv[i].slice()...)
			_ = p.Process(ctx, cmds[i])
		}
		return nil
	})
	var missing []int
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		_, _ = r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range missing {
				cmds[i] = script.command(ctx, true, keys[i], argv[i].slice()...)
				_ = p.Process(ctx, cmds[i])
			}
			return nil
		})
	}
	for i, cmd := range cmds {
		errs[i] = result(cmd)
	}
}

func scriptResult(cmd *redis.Cmd) error {
	n, err := cmd.Int64()
	switch {
	case err != nil:
		return err
	case n == 1:
		return nil
	case n == 0:
		return ErrNotHeld
	default:
		return errors.New("unexpected script reply " + strconv.FormatInt(n, 10))
	}
}

// renewResult is scriptResult for renew.lua, which also answers -1: the
// name is free (ErrGone).
func renewResult(cmd *redis.Cmd) error {
	if n, err := cmd.Int64(); err == nil && n == -1 {
		return ErrGone
	}
	return scriptResult(cmd)
}

// MaybeApplied reports whether err leaves it unknown if the server executed
// the command: everything but an error reply from the server itself (a
// timeout, a cancelled context, a broken connection).
func MaybeApplied(err error) bool {
	if err == nil {
		return false
	}
	var acks *AckError
	if errors.As(err, &acks) {
		return !acks.Undone
	}
	_, reply := replyOf(err)
	return !reply
}

// Guard runs the writes fn queues in one MULTI/EXEC transaction that Redis
// executes only if item still holds its name: the name's key is WATCHed and
// checked first, and any change to it (a takeover, an expiry, but also a
// renewal's PEXPIRE) makes EXEC write nothing, in which case Guard checks
// and tries again. It returns ErrNotHeld, having written nothing, when item
// does not hold the name. fn's keys must share the name's hash tag on a
// Cluster.
//
// A permit is held while its score is ahead of the server's clock, which
// WATCH cannot see pass: a permit that runs out between the check and EXEC
// does not abort it, unless a request for another permit drops it from the
// set meanwhile (permit.lua does before counting). The window is the
// transaction's round trip, and Lease.Exec refuses once the local deadline,
// which comes before the permit's score, has passed.
func (r *Redis) Guard(ctx context.Context, it Item, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	key := r.layout.Lease(it.Name)
	const attempts = 10
	for i := 1; ; i++ {
		var cmds []redis.Cmder
		err := r.client.Watch(ctx, func(tx *redis.Tx) error {
			var held bool
			switch {
			case it.Permit:
				var err error
				if held, err = permitHeld(ctx, tx, key, it.Token); err != nil {
					return err
				}
			case it.Reentrant:
				n, err := tx.HExists(ctx, key, it.Token).Result()
				if err != nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
					return err
				}
				held = n
			default:
				v, err := tx.Get(ctx, key).Result()
				if err != nil && err != redis.Nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
					return err
				}
				held = err == nil && v == it.Token
			}
			if !held {
				return ErrNotHeld
			}
			var err error
			cmds, err = tx.TxPipelined(ctx, fn)
			return err
		}, key)
		if errors.Is(err, redis.TxFailedErr) && i < attempts && ctx.Err() == nil {
			continue
		}
		return cmds, err
	}
}

// permitHeld reports whether token holds a permit of the semaphore at key
// (permit.lua): its score is ahead of the server's clock.
func permitHeld(ctx context.Context, c redis.Cmdable, key, token string) (bool, error) {
	score, err := c.ZScore(ctx, key, token).Result()
	switch {
	case err == redis.Nil || err != nil && redis.HasErrorPrefix(err, "WRONGTYPE"):
		return false, nil
	case err != nil:
		return false, err
	}
	now, err := c.Time(ctx).Result()
	if err != nil {
		return false, err
	}
	return score > float64(now.UnixMilli()), nil
}
