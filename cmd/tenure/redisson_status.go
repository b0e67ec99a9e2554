package main

// What status and list show of Redisson's own objects, kept apart from
// showRedisson: a plain "tenure status NAME" that finds a Redisson lock at
// NAME says so, "status --redisson" reads an RPermitExpirableSemaphore,
// and "list --redisson" finds Redisson locks with SCAN.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/spf13/cobra"
	"github.com/tenure-go/tenure/internal/backend"

	tenureinspect "github.com/tenure-go/tenure/inspect"
)

// redissonAt reads NAME's own key (no --prefix: Redisson's keys have
// none) for a "tenure status NAME" that found no tenure holder: Kind is
// Free unless a Redisson lock holds it.
func redissonAt(g *globals, name string) (tenureinspect.Holding, error) {
	ctx := context.Background()
	client, err := g.connect(ctx)
	if err != nil {
		return tenureinspect.Holding{}, err
	}
	defer client.Close()
	// Quorum mode has no Redisson lock (none spans nodes); a user of its
	// own is kept to tenure's keys by the rules docs/security.md gives,
	// and a refused read would fill the server's ACL LOG.
	if client.quorum() || (g.user != "" && g.user != "default") {
		return tenureinspect.Holding{Name: name, Kind: tenureinspect.Free}, nil
	}
	hs, err := tenureinspect.ReadRedisson(ctx, client.one(), "", name)
	if err != nil {
		return tenureinspect.Holding{}, err
	}
	h := hs[0]
	if !isRedissonKind(h.Kind) || !redissonFields(h.Owners) {
		h.Kind = tenureinspect.Free
	}
	return h, nil
}

// redissonInstead finishes "tenure status NAME" when NAME is free as
// tenure's but a Redisson lock holds the key NAME: --check exits 0 (NAME
// is held, by whatever), and the text says by whom and to add --redisson.
// done is false when no Redisson lock is found there, for status to go
// on. The read is a courtesy, made as the default user only (redissonAt);
// if it fails, status says what it said before.
func redissonInstead(cmd *cobra.Command, g *globals, o statusOptions, name string) (done bool, err error) {
	if o.permits > 0 {
		return false, nil
	}
	rh, err := redissonAt(g, name)
	if err != nil {
		g.log.Debug("not read as a Redisson lock", "name", name, "error", err)
		return false, nil
	}
	if rh.Kind == tenureinspect.Free {
		return false, nil
	}
	switch {
	case o.check:
		return true, nil
	case o.asJSON:
		// What status --redisson --json prints: its kind says what holds
		// the name, where tenure's object said "free".
		return true, writeJSON(cmd.OutOrStdout(), lockStatus(rh))
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%q holds no tenure lease; its key %q is a Redisson lock (%s) held by %s: "+
		"add --redisson to see it\n", name, name, rh.Kind, ownersText(rh.Owners))
	return true, nil
}

func isRedissonKind(k tenureinspect.Kind) bool {
	return k == tenureinspect.RedissonLock || k == tenureinspect.RedissonRead || k == tenureinspect.RedissonWrite
}

// redissonField is an owner field as Redisson writes one: <client
// id>:<thread id>, a writer's ending in ":write".
var redissonField = regexp.MustCompile(`^.+:-?[0-9]+(:write)?$`)

// redissonFields reports whether owners are a Redisson lock's: at least
// one, each a field of Redisson's form.
func redissonFields(owners map[string]int64) bool {
	if len(owners) == 0 {
		return false
	}
	for f := range owners {
		if !redissonField.MatchString(f) {
			return false
		}
	}
	return true
}

// redissonPermit is one permit of an RPermitExpirableSemaphore.
type redissonPermit struct {
	ID string `json:"id"`
	// NoExpiry: it was taken without a lease time.
	NoExpiry bool `json:"no_expiry"`
	// ExpiresInMs is how long it has left by the expiry its taker wrote
	// in its own clock: 0 or less once that has passed (the permit is
	// given back at the next acquire or count, Java's or Go's).
	ExpiresInMs int64 `json:"expires_in_ms"`
}

// semaphoreStatus is "status --redisson" of an RPermitExpirableSemaphore.
type semaphoreStatus struct {
	Name        string           `json:"name"`
	Kind        string           `json:"kind"` // "redisson-semaphore"
	FreePermits int64            `json:"free_permits"`
	Permits     []redissonPermit `json:"permits"`
	// TTLms is the semaphore's TTL (its free count's, which its permits'
	// set follows), -1 for none, as a lock's.
	TTLms int64 `json:"ttl_ms"`
}

// foreverMs is the expiry Redisson writes for a permit taken without a
// lease time (RedissonPermitExpirableSemaphore.nonExpirableTimeout).
const foreverMs int64 = 922337203685477

// readSemaphore reads the RPermitExpirableSemaphore at name: its free
// permits, an integer at the name, and the permits taken, the sorted set
// {NAME}:timeout scored by expiry (ms of the taker's clock). ok is false
// when name holds no integer.
func readSemaphore(ctx context.Context, c redis.UniversalClient, name string) (s semaphoreStatus, ok bool, err error) {
	timeouts := "{" + name + "}:timeout"
	if strings.Contains(name, "{") {
		timeouts = name + ":timeout"
	}
	var free *redis.StringCmd
	var taken *redis.ZSliceCmd
	var ttl *redis.DurationCmd
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		free = p.Get(ctx, name)
		taken = p.ZRangeWithScores(ctx, timeouts, 0, -1)
		ttl = p.PTTL(ctx, name)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return s, false, err
	}
	n, perr := strconv.ParseInt(free.Val(), 10, 64)
	if perr != nil {
		return s, false, nil
	}
	s = semaphoreStatus{Name: name, Kind: "redisson-semaphore", FreePermits: n, Permits: []redissonPermit{}, TTLms: ttlMs(ttl.Val())}
	now := time.Now().UnixMilli()
	for _, z := range taken.Val() {
		p := redissonPermit{ID: permitID(fmt.Sprint(z.Member)), NoExpiry: true}
		if at := int64(z.Score); at < foreverMs {
			p.NoExpiry, p.ExpiresInMs = false, at-now
		}
		s.Permits = append(s.Permits, p)
	}
	return s, true, nil
}

// permitID is a permit's id as Java's and Go's Redisson give it: the hex
// of the 16 bytes the sorted set holds (an id already text stays as is).
func permitID(member string) string {
	for _, r := range member {
		if !unicode.IsPrint(r) || r == utf8.RuneError {
			return hex.EncodeToString([]byte(member))
		}
	}
	return member
}

// showSemaphore is "status --redisson NAME" when NAME's key is a string:
// an RPermitExpirableSemaphore's free permits, or a key that is no
// Redisson object tenure knows.
func showSemaphore(cmd *cobra.Command, g *globals, o statusOptions, client *conns, name string) error {
	s, ok, err := readSemaphore(context.Background(), client.one(), name)
	if err != nil {
		return g.redisFailure(fmt.Sprintf("reading Redisson semaphore %q", name), err)
	}
	if !ok {
		return fail(exitUsage, "%q is not a Redisson lock or RPermitExpirableSemaphore: its key holds a Redis string", name)
	}
	switch {
	case o.check:
		if len(s.Permits) == 0 {
			return status(exitFree)
		}
		return nil
	case o.asJSON:
		return writeJSON(cmd.OutOrStdout(), s)
	}
	return printSemaphore(cmd.OutOrStdout(), s)
}

func printSemaphore(out io.Writer, s semaphoreStatus) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "name\t%s\n", s.Name)
	fmt.Fprintf(tw, "kind\t%s (RPermitExpirableSemaphore)\n", s.Kind)
	fmt.Fprintf(tw, "permits\t%d free, %d taken\n", s.FreePermits, len(s.Permits))
	for _, p := range s.Permits {
		switch {
		case p.NoExpiry:
			fmt.Fprintf(tw, "permit\t%s: no expiry (taken without a lease time)\n", p.ID)
		case p.ExpiresInMs <= 0:
			fmt.Fprintf(tw, "permit\t%s: expired %v ago, given back at the next acquire or count\n", p.ID,
				time.Duration(-p.ExpiresInMs)*time.Millisecond)
		default:
			fmt.Fprintf(tw, "permit\t%s: expires in %v\n", p.ID, time.Duration(p.ExpiresInMs)*time.Millisecond)
		}
	}
	return tw.Flush()
}

// listRedisson is "list --redisson": the Redisson locks (RLock,
// RFencedLock, RFairLock, RReadWriteLock) whose names match pattern,
// found with SCAN ... TYPE hash and read 500 a round trip, and the
// RPermitExpirableSemaphores with a permit taken (listSemaphores), in
// the order of their names.
func listRedisson(cmd *cobra.Command, g *globals, pattern string, asJSON bool) error {
	ctx := context.Background()
	client, err := g.connectFor(ctx, "list --redisson")
	if err != nil {
		return err
	}
	defer client.Close()
	out, err := listLocks(ctx, g, client.one(), pattern)
	if err != nil {
		return err
	}
	sems, err := listSemaphores(ctx, g, client.one(), pattern)
	if err != nil {
		return err
	}
	out = append(out, sems...)
	slices.SortFunc(out, func(a, b redissonStatus) int { return strings.Compare(a.Name, b.Name) })
	if asJSON {
		return writeJSON(cmd.OutOrStdout(), out)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tTTL\tTOKEN\tOWNERS")
	for _, s := range out {
		who := ownersText(s.Owners)
		if s.FreePermits != nil {
			who = fmt.Sprintf("%d permits taken, %d free", len(s.Permits), *s.FreePermits)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", s.Name, s.Kind, ttlText(s.TTLms), s.Token, who)
	}
	return tw.Flush()
}

// listLocks reads the Redisson locks whose names match pattern.
func listLocks(ctx context.Context, g *globals, c redis.UniversalClient, pattern string) ([]redissonStatus, error) {
	names, err := scanKeys(ctx, c, pattern, "hash")
	if err != nil {
		return nil, g.redisFailure("scanning", err)
	}
	out := []redissonStatus{}
	for len(names) > 0 {
		n := min(len(names), 500)
		hs, err := tenureinspect.ReadRedisson(ctx, c, "", names[:n]...)
		if err != nil {
			return nil, g.redisFailure("reading", err)
		}
		for _, h := range hs {
			if isRedissonKind(h.Kind) && redissonFields(h.Owners) {
				out = append(out, lockStatus(h))
			}
		}
		names = names[n:]
	}
	return out, nil
}

// listSemaphores reads the RPermitExpirableSemaphores whose names match
// pattern and that have a permit taken: those are held, as a lock with an
// owner is. They are found by their permits' sorted set, {NAME}:timeout
// (NAME:timeout when NAME has a hash tag of its own), which a semaphore
// has while a permit is taken; the free count, a string at NAME, is no
// sign of a semaphore by itself.
func listSemaphores(ctx context.Context, g *globals, c redis.UniversalClient, pattern string) ([]redissonStatus, error) {
	match := "{" + pattern + "}:timeout"
	if strings.Contains(pattern, "{") {
		match = pattern + ":timeout"
	}
	keys, err := scanKeys(ctx, c, match, "zset")
	if err != nil {
		return nil, g.redisFailure("scanning", err)
	}
	out := []redissonStatus{}
	for _, k := range keys {
		name := strings.TrimSuffix(k, ":timeout")
		if !strings.Contains(pattern, "{") {
			name = strings.TrimSuffix(strings.TrimPrefix(name, "{"), "}")
		}
		s, ok, err := readSemaphore(ctx, c, name)
		if err != nil {
			return nil, g.redisFailure(fmt.Sprintf("reading Redisson semaphore %q", name), err)
		}
		if !ok || len(s.Permits) == 0 {
			continue
		}
		free := s.FreePermits
		out = append(out, redissonStatus{Name: name, Kind: s.Kind, TTLms: s.TTLms, FreePermits: &free, Permits: s.Permits})
	}
	return out, nil
}

func ttlMs(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}

func ttlText(ms int64) string {
	if ms < 0 {
		return "none"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// scanKeys finds the keys of type typ that match pattern, sorted and
// without repeats (on a Cluster, every primary's).
func scanKeys(ctx context.Context, c redis.UniversalClient, pattern, typ string) ([]string, error) {
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.ScanType(ctx, 0, pattern, 1000, typ).Iterator()
		for it.Next(ctx) {
			mu.Lock()
			seen[it.Val()] = true
			mu.Unlock()
		}
		return it.Err()
	}
	if err := backend.EachPrimary(ctx, c, scan); err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(seen)), nil
}
