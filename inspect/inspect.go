// Package inspect reads who holds tenure's names, for code and tools that
// ask "who holds X?" without taking part: a read-only view of the keys that
// packages lease, reentrant, semaphore, rwlock and election write (the
// layout is docs/design.md section 3), and, with ReadRedisson, the locks
// Redisson (and package redisson) hold. The tenure command's status and
// list are built on it.
//
// A lease's token, the holder's proof of ownership, is never returned: only
// the holder identity (lease.WithHolder) and the metadata
// (lease.WithMetadata) that follow it in the stored value.
//
// What it reads is a snapshot, stale as soon as it returns: a name shown
// free may be taken the next moment. It never decides who may act; a lease
// does.
package inspect

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/lease"
)

// A Kind says what holds a name.
type Kind string

// The kinds a Holding has. A key of another Redis type, which tenure did
// not write, has that type's name ("list", "stream", ...).
const (
	// Free: nothing holds the name.
	Free Kind = "free"
	// Lease: a lease holds it (a read-write lock's writer is one).
	Lease Kind = "lease"
	// Reentrant: a reentrant lock (package reentrant) holds it.
	Reentrant Kind = "reentrant"
	// Permits: permits of a semaphore hold it, or the readers of a
	// read-write lock: the server holds the same set for both.
	Permits Kind = "permits"
	// Revoked: "tenure release --force" revoked its holder, and the name
	// stays barred to everyone until that holder confirms that its work
	// is dead, or until the holder's TTL (Holding.TTL) runs out
	// (docs/design.md, "A forced release"). Holding.Revoked says what was
	// revoked, and Holding.Unconfirmed who has not confirmed yet.
	Revoked Kind = "revoked"
)

// A Holding is what a name's keys said when they were read.
type Holding struct {
	Name string
	Kind Kind
	// TTL is the name's key's remaining TTL: -1 when it has none, 0 when
	// the name is free.
	TTL time.Duration
	// Fence is the name's fencing counter: the fence of the name's last
	// acquisition while it is held (0 once the counter expired, at most a
	// TTL after the last holder).
	Fence int64
	// Holder and Metadata are a lease's holder identity and metadata,
	// read from its stored value; empty when it has none.
	Holder, Metadata string
	// Owners are a reentrant lock's owners and their counts.
	Owners map[string]int64
	// Permits are the live permits, by fence; N is the semaphore's number
	// of permits stored with them while any is held (0 if none is stored).
	Permits []Permit
	N       int
	// Waiting is the number of waiters in the name's fair queue.
	Waiting int64
	// Leader is the elected leader, when the lease is an election's.
	Leader *election.Record
	// Revoked is, for a Revoked name, the kind that was revoked (Lease,
	// Reentrant or Permits); Unconfirmed are the holder identities (a
	// reentrant lock's owners) that have not confirmed yet ("" for a
	// holder without one).
	Revoked     Kind
	Unconfirmed []string

	// same is a short hash of the tokens (and owners) that make the hold
	// this hold: see Same. The tokens themselves are not kept, so that
	// printing a Holding (%+v prints unexported fields) shows none.
	same string
}

// A Permit is one live hold of a semaphore's permits (or a reader).
type Permit struct {
	Holder, Metadata string
	Fence            int64
	// TTL is the permit's own remaining TTL (its expiry less the server's
	// clock).
	TTL time.Duration
	// Count is how many permits the hold took at once
	// (semaphore.Permits.AcquireN); 1 for one.
	Count int
}

// Held is how many permits h's holds take, k for a hold of k.
func (h Holding) Held() int {
	n := 0
	for _, p := range h.Permits {
		n += p.Count
	}
	return n
}

// Same reports whether h and o show the same hold: the same kind and, for a
// lease, the same token; for permits, the same tokens. Tools reading
// several nodes (quorum mode) compare them with it without seeing a token.
func (h Holding) Same(o Holding) bool { return h.Kind == o.Kind && h.same == o.same }

// ID is a short hash of what makes the hold this hold (a lease's token,
// the permits' tokens, a lock's owners): two Holdings of one kind are the
// Same when their IDs are equal. It reveals nothing of a token.
func (h Holding) ID() string { return h.same }

// digest is a short hash of parts, in order.
func digest(parts []string) string {
	s := sha256.New()
	for _, p := range parts {
		s.Write([]byte(p))
		s.Write([]byte{0})
	}
	return hex.EncodeToString(s.Sum(nil)[:12])
}

// Read reads names under prefix ("" for lease.DefaultKeyPrefix) and
// returns one Holding for each, in order. A name's keys are read in one
// MULTI/EXEC, so that its kind, holder, fence and leader are of one
// instant: a pipeline alone lets another client's commands run between
// them (Redis reads a long pipeline in parts), and could show one holder's
// value beside the next one's fence. On one server (or a Sentinel group)
// every name is read in one transaction, one round trip; on a Cluster,
// which runs a transaction in one slot only, each name in its own, a few
// at a time.
func Read(ctx context.Context, c redis.UniversalClient, prefix string, names ...string) ([]Holding, error) {
	if prefix == "" {
		prefix = lease.DefaultKeyPrefix
	}
	l := keys.Layout{Prefix: prefix}
	out := make([]Holding, len(names))
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return out, readTx(ctx, c, l, names, out)
	}
	var (
		wg   sync.WaitGroup
		turn = make(chan struct{}, 16)
		errs = make([]error, len(names))
	)
	for i := range names {
		turn <- struct{}{}
		wg.Go(func() {
			defer func() { <-turn }()
			errs[i] = readTx(ctx, cc, l, names[i:i+1], out[i:i+1])
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readTx reads names in one transaction into out.
func readTx(ctx context.Context, c redis.UniversalClient, l keys.Layout, names []string, out []Holding) error {
	all := make([]reads, len(names))
	var now *redis.TimeCmd
	sent, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		// The server's clock, for the permits' TTLs: their scores are
		// expiries in it.
		now = p.Time(ctx)
		for i, n := range names {
			all[i] = queue(ctx, p, l, n)
		}
		return nil
	})
	// Each read of a kind the key is not (GET of a set, ...) is WRONGTYPE,
	// which is expected; any other error, on any command, is not: a
	// refusal of one command must not hide behind a WRONGTYPE before it,
	// nor behind the EXECABORT that go-redis gives every command the
	// server did not refuse itself when one was refused (NOPERM) as it
	// was queued.
	if err != nil {
		var abort error
		for _, cmd := range sent {
			switch e := cmd.Err(); {
			case e == nil, errors.Is(e, redis.Nil), redis.HasErrorPrefix(e, "WRONGTYPE"):
			case redis.HasErrorPrefix(e, "EXECABORT"):
				abort = cmp.Or(abort, e)
			default:
				return e
			}
		}
		if abort != nil {
			return abort
		}
	}
	for i, n := range names {
		out[i] = all[i].holding(n, now.Val().UnixMilli())
	}
	return nil
}

// reads are the commands that read one name.
type reads struct {
	typ     *redis.StatusCmd
	pttl    *redis.DurationCmd
	fence   *redis.StringCmd
	owners  *redis.MapStringStringCmd
	queue   *redis.IntCmd
	record  *redis.SliceCmd
	value   *redis.StringCmd
	members *redis.ZSliceCmd
	fences  *redis.MapStringStringCmd
}

func queue(ctx context.Context, p redis.Pipeliner, l keys.Layout, n string) reads {
	k := l.Lease(n)
	return reads{
		typ:     p.Type(ctx, k),
		pttl:    p.PTTL(ctx, k),
		fence:   p.Get(ctx, l.Fence(n)),
		owners:  p.HGetAll(ctx, k),
		queue:   p.ZCard(ctx, l.Queue(n)),
		record:  p.HMGet(ctx, l.Leader(n), "identity", "fence", "lease"),
		value:   p.Get(ctx, k),
		members: p.ZRangeWithScores(ctx, k, 0, -1),
		fences:  p.HGetAll(ctx, l.Permits(n)),
	}
}

// holding is what the reads of name say, nowMS being the server's clock.
func (r reads) holding(name string, nowMS int64) Holding {
	h := Holding{Name: name, Kind: Kind(r.typ.Val()), Waiting: r.queue.Val()}
	h.Fence, _ = strconv.ParseInt(r.fence.Val(), 10, 64)
	switch h.Kind {
	case "none":
		h.Kind = Free
	case "string":
		h.Kind = Lease
		v := r.value.Val()
		h.Holder, h.Metadata, h.same = lease.HolderOf(v), lease.MetadataOf(v), digest([]string{v})
		if rv, ok := keys.ParseRevocation(v); ok {
			h.Kind, h.Holder, h.Metadata = Revoked, "", ""
			h.Revoked = map[string]Kind{"string": Lease, "hash": Reentrant, "zset": Permits}[rv.Kind]
			for _, t := range rv.Tokens {
				if h.Revoked == Reentrant {
					h.Unconfirmed = append(h.Unconfirmed, t)
				} else {
					h.Unconfirmed = append(h.Unconfirmed, lease.HolderOf(t))
				}
			}
			if h.Revoked == Lease && len(rv.Tokens) == 1 {
				h.Holder, h.Metadata = lease.HolderOf(rv.Tokens[0]), lease.MetadataOf(rv.Tokens[0])
			}
		}
	case "hash":
		h.Kind = Reentrant
		h.Owners = map[string]int64{}
		var parts []string
		for o, v := range r.owners.Val() {
			h.Owners[o], _ = strconv.ParseInt(v, 10, 64)
			parts = append(parts, o+"="+v)
		}
		sort.Strings(parts)
		h.same = digest(parts)
	case "zset":
		h.Kind = Permits
		var tokens []string
		h.Permits, h.N, tokens = permits(r.members.Val(), r.fences.Val(), nowMS)
		h.same = digest(tokens)
	}
	if h.Kind != Free {
		h.TTL = -1
		if d := r.pttl.Val(); d >= 0 {
			h.TTL = d
		}
	}
	if v := r.record.Val(); h.Kind == Lease && len(v) == 3 {
		id, _ := v[0].(string)
		fs, _ := v[1].(string)
		// The record's lease digest is this lease's ID (election's
		// leaseDigest); a record without one, from an older tenure, is
		// the leader's while its fence is the counter's.
		dg, _ := v[2].(string)
		if f, err := strconv.ParseInt(fs, 10, 64); err == nil && id != "" && (dg == h.same || dg == "" && f == h.Fence) {
			h.Leader = &election.Record{Name: name, Identity: id, Fence: f}
		}
	}
	return h
}

// permits are the live holds of a set (members scored by expiry, in server
// ms) by fence, the n stored with them, and their tokens, sorted. A hold
// of k permits (semaphore.Permits.AcquireN) is k members: its token, which
// has a fence in P{N}:permits, and token#2 ... token#k, which have none;
// it is one Permit with Count k.
func permits(members []redis.Z, fences map[string]string, nowMS int64) ([]Permit, int, []string) {
	var out []Permit
	var tokens, base []string // base[i] is out[i]'s token
	extra := map[string]int{}
	for _, z := range members {
		token, _ := z.Member.(string)
		left := int64(z.Score) - nowMS
		if left <= 0 {
			continue // expired: free, whether or not removed yet
		}
		tokens = append(tokens, token)
		if _, ok := fences[token]; !ok {
			if i := strings.LastIndexByte(token, '#'); i > 0 {
				if _, ok := fences[token[:i]]; ok {
					extra[token[:i]]++
					continue
				}
			}
		}
		f, _ := strconv.ParseInt(fences[token], 10, 64)
		out = append(out, Permit{Holder: lease.HolderOf(token), Metadata: lease.MetadataOf(token), Fence: f,
			TTL: time.Duration(left) * time.Millisecond, Count: 1})
		base = append(base, token)
	}
	for i := range out {
		out[i].Count += extra[base[i]]
	}
	sort.Strings(tokens)
	sort.Slice(out, func(a, b int) bool { return out[a].Fence < out[b].Fence })
	n := 0
	if len(out) > 0 {
		n, _ = strconv.Atoi(fences["n"])
	}
	return out, n, tokens
}

// Names returns the names under prefix ("" for lease.DefaultKeyPrefix)
// that something holds and that match pattern, a Redis glob over the name
// alone ("*" for every one), sorted. It walks the keyspace with SCAN
// (never KEYS, which would stop the server), on a Cluster every primary's:
// a name held while it runs may be missed, and one released since
// returned.
func Names(ctx context.Context, c redis.UniversalClient, prefix, pattern string) ([]string, error) {
	if prefix == "" {
		prefix = lease.DefaultKeyPrefix
	}
	l := keys.Layout{Prefix: prefix}
	match := keys.Layout{Prefix: EscapeGlob(prefix)}.Lease(pattern)
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, match, 1000).Iterator()
		for it.Next(ctx) {
			if n, ok := l.NameOf(it.Val()); ok {
				mu.Lock()
				seen[n] = true
				mu.Unlock()
			}
		}
		return it.Err()
	}
	if err := backend.EachPrimary(ctx, c, scan); err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// EscapeGlob escapes what Redis's glob matcher reads as special in s, so
// that a pattern matches s literally.
func EscapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^-`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
