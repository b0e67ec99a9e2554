package main

// What a name's keys say about it (package inspect), in the form status,
// list and the messages of run and elect show it: holding, its permits, and
// their words. A token is never among them.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/election"
	tenureinspect "github.com/tenure-go/tenure/inspect"
)

// holding is what a name's keys say about it.
type holding struct {
	Name string `json:"name"`
	// Kind is "lease" (a read-write lock's writer is one), "reentrant" (a
	// reentrant lock), "permits" (a semaphore's, or a read-write lock's
	// readers: the server cannot tell them apart), "free", or the Redis
	// type of a key that tenure did not write.
	Kind string `json:"kind"`
	// TTLms is the lock's remaining TTL in milliseconds; -1 when it has
	// none, 0 when free.
	TTLms int64 `json:"ttl_ms"`
	// Fence is the name's fencing counter: the holder's fencing token
	// while it is held (0 if the name was never held).
	Fence int64 `json:"fence"`
	// Owners are a reentrant lock's owners and their counts.
	Owners map[string]int64 `json:"owners,omitempty"`
	// Waiting is the number of waiters in the name's fair queue.
	Waiting int64 `json:"waiting"`
	// Holder is a lease's holder identity (lease.WithHolder; tenure run
	// sets host/pid), read from the stored value; empty when it has none.
	Holder string `json:"holder,omitempty"`
	// Metadata is a lease's metadata (lease.WithMetadata, run --metadata).
	Metadata string `json:"metadata,omitempty"`
	// Leader is the elected leader, when the holder is one.
	Leader *election.Record `json:"leader,omitempty"`
	// Permits are the live permits of a semaphore (or a read lock's
	// readers), by fence; Held is how many.
	Permits []permit `json:"permits,omitempty"`
	Held    int      `json:"held,omitempty"`
	// N is the semaphore's number of permits, stored with them by the
	// request that took the first (or the latest --resize): a request with
	// another N is refused while any is held. 0 when none is held, or the
	// permits were taken by a tenure that did not store it.
	N int `json:"n,omitempty"`
	// Limit is status -n's N, when given, and Free how many of N permits
	// a request with that N could take now (waiters aside): N - Held for
	// permits, N for a free name, 0 for a name a lease or lock holds.
	Limit int  `json:"limit,omitempty"`
	Free  *int `json:"free,omitempty"`
	// Revoked is, for kind "revoked" (release --force revoked the
	// holder), the kind that was revoked: "lease", "reentrant" or
	// "permits"; Unconfirmed the holders that have not confirmed yet that
	// their work is dead. The name is free when the last confirms, or
	// when TTLms runs out.
	Revoked     string   `json:"revoked,omitempty"`
	Unconfirmed []string `json:"unconfirmed,omitempty"`
	// Nodes are each quorum node's own view (quorum.go), in quorum mode.
	Nodes []nodeView `json:"nodes,omitempty"`
	// id tells holds apart without their tokens (inspect.Holding.ID):
	// quorum mode compares it.
	id string
}

// permit is one live permit. Its token, the holder's secret, is never
// shown: only the holder identity that follows it (lease.HolderOf).
type permit struct {
	Holder   string `json:"holder,omitempty"`
	Metadata string `json:"metadata,omitempty"`
	Fence    int64  `json:"fence"`
	// TTLms is the permit's own remaining TTL (its expiry, the set's
	// score, less the server's TIME).
	TTLms int64 `json:"ttl_ms"`
	// Count is how many permits the holder took at once
	// (semaphore.AcquireN), when more than one.
	Count int `json:"count,omitempty"`
}

// permitsKind is how status and list name the kind "permits": the server
// holds the same set for a semaphore and for a read-write lock's readers.
const permitsKind = "permits (semaphore or read lock)"

// setLimit sets Limit and Free for status -n N.
func (h *holding) setLimit(n int) {
	if n <= 0 {
		return
	}
	free := 0
	switch h.Kind {
	case "free":
		free = n
	case "permits":
		free = max(0, n-h.Held)
	}
	h.Limit, h.Free = n, &free
}

// inspect reads names in one pipelined round trip (package inspect), in
// the form status and list print. A lease's token is never shown: it is
// the holder's secret; only the holder identity that follows it is.
func inspect(ctx context.Context, c redis.UniversalClient, prefix string, names []string) ([]holding, error) {
	hs, err := tenureinspect.Read(ctx, c, prefix, names...)
	if err != nil {
		return nil, err
	}
	out := make([]holding, len(hs))
	for i, v := range hs {
		h := holding{Name: v.Name, Kind: string(v.Kind), Fence: v.Fence, Waiting: v.Waiting, Holder: v.Holder,
			Metadata: v.Metadata, Owners: v.Owners, Leader: v.Leader, N: v.N, id: v.ID(),
			Revoked: string(v.Revoked), Unconfirmed: v.Unconfirmed}
		if v.Kind != tenureinspect.Free {
			h.TTLms = -1
			if v.TTL >= 0 {
				h.TTLms = v.TTL.Milliseconds()
			}
		}
		for _, p := range v.Permits {
			pm := permit{Holder: p.Holder, Metadata: p.Metadata, Fence: p.Fence, TTLms: p.TTL.Milliseconds()}
			if p.Count > 1 {
				pm.Count = p.Count
			}
			h.Permits = append(h.Permits, pm)
		}
		if v.Kind == tenureinspect.Permits {
			h.Held = v.Held()
		}
		out[i] = h
	}
	return out, nil
}

// kindText is the kind as status and list print it.
func (h holding) kindText() string {
	switch h.Kind {
	case "permits":
		return permitsKind
	case "revoked":
		return fmt.Sprintf("revoked (%s): barred until %s, or its ttl runs out", h.revokedWhat(), h.confirmer())
	}
	return h.Kind
}

// revokedWhat says what release --force revoked, for a revoked name.
func (h holding) revokedWhat() string {
	switch h.Revoked {
	case "lease":
		return "a lease, by release --force"
	case "reentrant":
		return "a reentrant lock, by release --force"
	case "permits":
		return "permits, by release --force"
	}
	return "by release --force"
}

// confirmer says who must confirm a revocation that its work is dead.
func (h holding) confirmer() string {
	if h.Revoked == "reentrant" {
		return "nobody (a reentrant lock's owners do not confirm)"
	}
	who := make([]string, 0, len(h.Unconfirmed))
	for _, u := range h.Unconfirmed {
		if u == "" {
			u = "a holder without identity"
		}
		who = append(who, shown(u))
	}
	switch len(who) {
	case 0:
		return "nobody"
	case 1:
		return who[0] + " confirms that its work is dead"
	}
	return strings.Join(who, ", ") + " confirm that their work is dead"
}

// permitText is one permit, as status prints it.
func (p permit) text() string {
	who := "no holder identity"
	if p.Holder != "" {
		who = shown(p.Holder)
	}
	md := ""
	if p.Metadata != "" {
		md = ", metadata " + shown(p.Metadata)
	}
	if p.Count > 1 {
		return fmt.Sprintf("%d permits: fence %d, ttl %v, holder %s%s", p.Count, p.Fence, time.Duration(p.TTLms)*time.Millisecond, who, md)
	}
	return fmt.Sprintf("fence %d, ttl %v, holder %s%s", p.Fence, time.Duration(p.TTLms)*time.Millisecond, who, md)
}

// readLockN is the N stored with a read-write lock's readers (package
// rwlock's number of reader permits, 1<<30: no limit in practice). status
// shows it as "unlimited"; --json keeps the number.
const readLockN = 1 << 30

// nText is N as status shows it.
func (h holding) nText() string {
	if h.N == readLockN {
		return "unlimited (a read lock's readers)"
	}
	return strconv.Itoa(h.N)
}

// heldText says how many permits are held and, with status -n, how many
// are free.
func (h holding) heldText() string {
	if h.Free != nil {
		return fmt.Sprintf("%d held, %d of -n %d free", h.Held, *h.Free, h.Limit)
	}
	if h.N == readLockN {
		return fmt.Sprintf("%d held of no limit (a read lock's readers)", h.Held)
	}
	if h.N > 0 {
		return fmt.Sprintf("%d held of n=%d", h.Held, h.N)
	}
	return fmt.Sprintf("%d held (no N stored: status -n N shows how many are free)", h.Held)
}

func (h holding) ttl() string {
	switch {
	case h.Kind == "free":
		return "-"
	case h.TTLms < 0:
		return "none"
	}
	return (time.Duration(h.TTLms) * time.Millisecond).String()
}

func (h holding) holders() string {
	var parts []string
	if h.Kind == "reentrant" {
		owners := make([]string, 0, len(h.Owners))
		for o := range h.Owners {
			owners = append(owners, o)
		}
		sort.Strings(owners)
		for _, o := range owners {
			parts = append(parts, fmt.Sprintf("%s×%d", o, h.Owners[o]))
		}
	}
	if h.Kind == "permits" {
		who := make([]string, 0, len(h.Permits))
		for _, p := range h.Permits {
			w := p.Holder
			if w == "" {
				w = "?"
			}
			if p.Count > 1 {
				w = fmt.Sprintf("%s×%d", w, p.Count)
			}
			who = append(who, w)
		}
		parts = append(parts, fmt.Sprintf("%d permits: %s", h.Held, strings.Join(who, " ")))
	}
	if h.Kind == "revoked" {
		parts = append(parts, "revoked "+h.Revoked+", unconfirmed: "+strings.Join(h.Unconfirmed, " "))
	} else if h.Leader != nil {
		parts = append(parts, "leader "+h.Leader.Identity)
	} else if h.Holder != "" {
		parts = append(parts, h.Holder)
	}
	if h.Waiting > 0 {
		parts = append(parts, fmt.Sprintf("%d waiting", h.Waiting))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// who says who holds the name, for messages ("NAME is held by ..."):
// the holder identity when the lease carries one.
func (h holding) who() string {
	switch h.Kind {
	case "":
		return "another holder" // the read failed
	case "free":
		return "nobody any more (released meanwhile)"
	case "lease":
		switch {
		case h.Leader != nil:
			return fmt.Sprintf("leader %s (term %d)", shown(h.Leader.Identity), h.Leader.Fence)
		case h.Holder != "":
			return fmt.Sprintf("%s (fence %d, ttl %s)", shown(h.Holder), h.Fence, h.ttl())
		}
		return fmt.Sprintf("another holder (fence %d, ttl %s; it stored no holder identity)", h.Fence, h.ttl())
	case "reentrant":
		return "a reentrant lock of " + h.holders()
	case "revoked":
		return fmt.Sprintf("nobody: release --force revoked it (%s); it is free once %s, or in %s at most (its ttl)",
			h.revokedWhat(), h.confirmer(), h.ttl())
	case "permits":
		who := make([]string, 0, len(h.Permits))
		for _, p := range h.Permits {
			who = append(who, p.text())
		}
		what := fmt.Sprintf("%d permits", h.Held)
		if h.Held == 1 {
			what = "1 permit"
		}
		return fmt.Sprintf("%s of a semaphore or read lock (%s)", what, strings.Join(who, "; "))
	}
	return fmt.Sprintf("a Redis %s that tenure did not write", h.Kind)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
