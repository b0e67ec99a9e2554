// Package keys is tenure's Redis key layout and the rules a name and a
// prefix must follow to make sound keys (docs/design.md section 3). The
// backend, lease, election, the tenure command and the examples all build
// their keys here, so that a key is spelled in one place.
//
// For a name N and a prefix P, every key and channel starts with P{N}: the
// braces make N the Redis Cluster hash tag, so all of a name's keys live in
// one slot and each script touches one slot. That is why the prefix may not
// hold a brace and a name may not start with '}' (its tag would be empty and
// its keys would scatter over slots).
package keys

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

const (
	// DefaultPrefix is the prefix of every key unless a manager is given
	// another (lease.DefaultKeyPrefix).
	DefaultPrefix = "tenure:"
	// MaxNameLen is the longest name accepted, in bytes (lease.MaxNameLen).
	MaxNameLen = 1024
)

// CheckName returns why name cannot make a sound key, or nil. The reason is
// plain ("empty", `"}x" starts with '}'`): each caller says what was wrong
// in its own terms (lease.ErrInvalidName, a usage error of the command).
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("empty")
	case len(name) > MaxNameLen:
		return fmt.Errorf("%d bytes, over the %d-byte limit", len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%q is not valid UTF-8", name)
	case name[0] == '}':
		// P{}x... has an empty hash tag: Cluster would hash the whole
		// key, and the name's keys would scatter over slots.
		return fmt.Errorf("%q starts with '}'", name)
	}
	return nil
}

// CheckPrefix returns why prefix cannot start keys, or nil: a brace in it
// would become, or break, the Cluster hash tag that keeps a name's keys in
// one slot.
func CheckPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("%q contains a brace", prefix)
	}
	if !utf8.ValidString(prefix) {
		return errors.New("is not valid UTF-8")
	}
	return nil
}

// Layout maps names to the keys and channels under one prefix. Managers,
// elections and tools that must see each other's names use equal prefixes.
type Layout struct {
	Prefix string
}

func (l Layout) base(name string) string { return l.Prefix + "{" + name + "}" }

// Lease is the name's key, P{N}, whatever kind of lock holds the name: a
// lease's token (a string), a reentrant lock's owner counts (a hash), or a
// semaphore's permits (a sorted set of token -> expiry in server ms). It
// lives the holder's TTL (the longest-lived permit's), renewed by the
// watchdog, and is deleted by release (of the last permit).
func (l Layout) Lease(name string) string { return l.base(name) }

// Fence is the name's fencing counter, P{N}:fence (docs/design.md S5). It is
// given the lease key's TTL whenever that is set or refreshed, so it outlives
// a release by at most a TTL; fences stay increasing after it expires
// because each is at least the server's time in microseconds.
func (l Layout) Fence(name string) string { return l.base(name) + ":fence" }

// Channel is the channel P{N}:released, on which "released" is published
// when the name becomes free: by release.lua, by abandon.lua and leave.lua
// when they free it, and by `tenure release --force`. Waiters subscribe to
// it instead of polling.
func (l Layout) Channel(name string) string { return l.base(name) + ":released" }

// Retired is P{N}:retired:<id>, the marker of a request that is over, so
// that a copy of it arriving later is answered as the first was and not
// applied twice. id is the token of an acquire its sender gave up
// (abandon.lua; acquire.lua then refuses the acquire, and the marker lives
// the acquire's TTL), or the id of a release or a reentrant entry the server
// applied (release.lua; acquire.lua and reenter.lua leave an entry mark
// that abandon.lua can take back: it lives RetiredFor, or RetiredFree(ttl)
// after a release that freed the name).
func (l Layout) Retired(name, id string) string { return l.base(name) + retired + id }

// Queue is the name's fair queue, P{N}:queue: a sorted set of waiting tokens
// scored by arrival (server µs). Entries leave when granted, when their
// waiter gives up (leave.lua) or abandons, or when forgotten (QueueExpiry);
// the key's TTL is kept at least the longest waiter's patience
// (lease.DefaultQueueTimeout), so it is gone soon after its last waiter.
func (l Layout) Queue(name string) string { return l.base(name) + ":queue" }

// QueueExpiry is P{N}:queue:expiry: when each queued token is forgotten
// (server ms), so that a waiter that died stops blocking the queue. It lives
// as Queue does.
func (l Layout) QueueExpiry(name string) string { return l.base(name) + ":queue:expiry" }

// Permits is P{N}:permits, a semaphore's fence of each permit (a hash of
// token -> fence) while the name's key holds its permits (a sorted set of
// token -> expiry, server ms). It lives as long as that key.
func (l Layout) Permits(name string) string { return l.base(name) + ":permits" }

// Leader is the election's leader record, P{N}:leader: a hash of identity
// and fence, written through Lease.Exec so that only the live leader
// writes it. It lives the leadership TTL, refreshed during the term, and is
// deleted when the term ends.
func (l Layout) Leader(name string) string { return l.base(name) + ":leader" }

// LeaderChanged is the channel P{N}:leader:changed, on which a new leader
// publishes its fence, so that observers need not poll.
func (l Layout) LeaderChanged(name string) string { return l.base(name) + ":leader:changed" }

// AcquireKeys returns acquire.lua's KEYS for a request with token: Lease,
// Fence, Retired(token), Queue and QueueExpiry. They share one backing
// string, built in one allocation: an acquire is the hot path.
func (l Layout) AcquireKeys(name, token string) []string {
	return l.join(name, token, "", ":fence", retired, ":queue", ":queue:expiry")
}

// PermitKeys returns permit.lua's KEYS for a request with token:
// AcquireKeys, then Permits.
func (l Layout) PermitKeys(name, token string) []string {
	return l.join(name, token, "", ":fence", retired, ":queue", ":queue:expiry", ":permits")
}

// ReleaseKeys returns release.lua's KEYS: Lease and Retired(op), built as
// AcquireKeys builds its keys.
func (l Layout) ReleaseKeys(name, op string) []string {
	return l.join(name, op, "", retired)
}

// retired is the suffix of Retired's keys, which join follows with the id.
const retired = ":retired:"

// join returns base(name)+suffix for each suffix, and id after the suffix
// retired; the strings slice one backing string, so that all of them cost
// one allocation (and the slice another).
func (l Layout) join(name, id string, suffixes ...string) []string {
	base := len(l.Prefix) + len(name) + 2
	size := func(s string) int {
		if s == retired {
			return base + len(s) + len(id)
		}
		return base + len(s)
	}
	n := 0
	for _, s := range suffixes {
		n += size(s)
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range suffixes {
		b.WriteString(l.Prefix)
		b.WriteByte('{')
		b.WriteString(name)
		b.WriteByte('}')
		b.WriteString(s)
		if s == retired {
			b.WriteString(id)
		}
	}
	all := b.String()
	keys := make([]string, len(suffixes))
	for i, s := range suffixes {
		keys[i], all = all[:size(s)], all[size(s):]
	}
	return keys
}

// NameOf returns the name whose Lease key is key, and false when key is not
// a lease key under this prefix. A name may itself contain "}:fence", so
// NameOf(Fence(n)) can be a valid name: the one whose lease key that is.
func (l Layout) NameOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, l.Prefix+"{")
	if !ok || !strings.HasSuffix(rest, "}") || len(rest) < 2 {
		return "", false
	}
	return rest[:len(rest)-1], true
}

// RetiredFor is how long the marker of a release or re-entry that leaves
// its owner holding the name lives: longer than a client library keeps
// resending a request whose reply was lost. Applying a reentrant lock's
// inner exit twice would free the name under its owner.
const RetiredFor = 10 * time.Second

// RetiredFree is how long the marker of a release that frees the name
// lives: RetiredFor, but no longer than the lease's TTL (when known), so
// that no key of a name outlives its last holder by more than a TTL. A copy
// resent later finds nothing of its holder to take.
func RetiredFree(ttl time.Duration) time.Duration {
	if ttl > 0 && ttl < RetiredFor {
		return ttl
	}
	return RetiredFor
}

// RevokedPrefix starts the value that "tenure release --force" leaves at a
// name's key in place of its holder (a revocation, docs/design.md, "A
// forced release"): the line "tenure-revoked", the kind it replaced
// ("string", "hash" or "zset"), then one line for each token that may
// confirm, each holder's token (a lease's, or a permit's; a reentrant
// lock's owners, which no tenure command holds and so never confirm). A
// token never holds a newline: its random part is hex and its holder
// identity and metadata are printable. The key keeps the old holder's TTL, so
// every acquisition script sees the name held (a SET NX fails on it, a
// permit finds another kind) until the last holder confirms that its
// work is dead (cmd/tenure's release_revoked.lua deletes it), or the TTL
// runs out; and every renewal of the old holder fails (the key holds no
// token of it), which is how it learns that it lost the name.
const RevokedPrefix = "tenure-revoked\n"

// A Revocation is what a revocation marker (RevokedPrefix) holds.
type Revocation struct {
	// Kind is the Redis type of what was revoked: "string" (a lease),
	// "hash" (a reentrant lock) or "zset" (a semaphore's permits, or a
	// read-write lock's readers).
	Kind string
	// Tokens are the tokens (or owners) that have not confirmed yet.
	Tokens []string
}

// ParseRevocation reads a key's string value as a revocation marker; ok is
// false when it is not one (a lease's token, or anything else).
func ParseRevocation(v string) (r Revocation, ok bool) {
	rest, ok := strings.CutPrefix(v, RevokedPrefix)
	if !ok {
		return Revocation{}, false
	}
	lines := strings.Split(rest, "\n")
	r.Kind = lines[0]
	for _, t := range lines[1:] {
		if t != "" {
			r.Tokens = append(r.Tokens, t)
		}
	}
	return r, true
}
