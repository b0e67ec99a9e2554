package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/keys"
)

// The slots Redis Cluster's specification and CLUSTER KEYSLOT give.
func TestSlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":            0x31C3 & 16383, // the spec's CRC16 check value
		"foo":                  12182,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"user1000":             3443,
		"foo{}{bar}":           8363, // an empty tag: the whole key
		"tenure:{a}:fence":     15495,
		"a":                    15495,
	} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
}

// Only an error the server gave the batch script itself makes the backend
// fall back to one renew.lua call per lease; an outage or a refusal that
// renew.lua would meet too does not.
func TestBatchUnsupported(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("dial tcp: connection refused"), false},
		{redis.ErrClosed, false},
		{proto("ERR Error running script (call to f_x): @user_script:30: ERR wrong number of arguments for 'pexpire' command"), true},
		{proto("ERR Error running script (call to f_x): @user_script:30: @user_script: 30: Wrong number of args calling Redis command From Lua script"), true},
		{proto("NOSCRIPT No matching script"), false},
		{proto("NOPERM this user has no permissions"), false},
		{proto("READONLY You can't write against a read only replica."), false},
		{proto("OOM command not allowed"), false},
		{proto("LOADING Redis is loading the dataset in memory"), false},
	} {
		if got := batchUnsupported(c.err); got != c.want {
			t.Errorf("batchUnsupported(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// transportFailure tells a server out of reach from its reply and from the
// caller's context ending.
func TestTransportFailure(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), true},
		{fmt.Errorf("renew: %w", io.EOF), true},
		{redis.ErrClosed, true},
		{proto("MOVED 3999 127.0.0.1:6381"), false},
		{proto("NOSCRIPT No matching script"), false},
		{fmt.Errorf("acquire script: %w", context.Canceled), false},
		{context.DeadlineExceeded, false},
	} {
		if got := transportFailure(c.err); got != c.want {
			t.Errorf("transportFailure(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// The checks an acquire, a release and a batch call make of their error
// allocate nothing when it is nil, the common case (transportFailure once
// cost every acquire and release an allocation).
func TestErrorChecksOfNilAllocateNothing(t *testing.T) {
	n := testing.AllocsPerRun(100, func() {
		_ = transportFailure(nil)
		_ = batchUnsupported(nil)
		_ = nodeUnsupported(nil)
		_, _ = replyOf(nil)
		_ = UnknownCommand(nil)
		_ = isRedisTooOld(nil)
	})
	if n != 0 {
		t.Errorf("%v allocations a call of nil, want 0", n)
	}
}

// proto is an error reply as go-redis returns one.
type proto string

func (e proto) Error() string { return string(e) }
func (proto) RedisError()     {}

// Names whose own braces pick a hash tag other than their keys' ("x{t}"
// hashes "t", its key P{x{t}} hashes "x{t"), each beside a name of the
// slot the name alone hashes to ("t"), or of its keys' tag ("a}b{" and
// "a"): grouped by the name, a renewal call mixes slots (CROSSSLOT) or
// splits one.
var braceNames = []string{
	"x{t}", "t", "x{t}y", "{a}", "a", "{a}}", "{a}b{c}", "job{7}", "7", "job{7}:b",
	"a}b{", "a}c", "{}", "{{a}}", "{a", "é{ü}", "ü", "世{界}", "界", "{", "x{}y",
}

// keysOf returns every key and channel the layout builds for name, the
// lease key first: the ones a script of one name is given (acquire.lua's,
// permit.lua's, release.lua's) and the ones renew_leases.lua is given for
// several names (lease and fence).
func keysOf(l Layout, name string) []string {
	ks := []string{l.Lease(name), l.Fence(name), l.Channel(name), l.Retired(name, "0123456789abcdef.h"),
		l.Queue(name), l.QueueExpiry(name), l.Permits(name), l.Leader(name), l.LeaderChanged(name)}
	ks = append(ks, l.PermitKeys(name, "tok")...)
	return append(ks, l.ReleaseKeys(name, "op")...)
}

// checkSlots fails t unless every key of name has its lease key's slot.
func checkSlots(t *testing.T, l Layout, name string) {
	t.Helper()
	ks := keysOf(l, name)
	for _, k := range ks[1:] {
		if slot(k) != slot(ks[0]) {
			t.Fatalf("name %q: %q in slot %d, its lease key %q in %d", name, k, slot(k), ks[0], slot(ks[0]))
		}
	}
}

// checkGrouping fails t unless a Cluster backend batching by slot (a
// server without renew_node.lua) renewing names (one TTL) puts each
// renew_leases.lua call's keys in one slot, and the leases of one slot in
// one call.
func checkGrouping(t *testing.T, prefix string, names []string) {
	t.Helper()
	r := &Redis{layout: Layout{Prefix: prefix}, batch: batchSlots}
	r.noNodeBatch.Store(true)
	items := make([]Item, len(names))
	slots := map[int]bool{}
	for i, n := range names {
		items[i] = Item{Name: n, Token: "tok", TTL: time.Second}
		slots[slot(r.layout.Lease(n))] = true
	}
	calls := r.renewCalls(context.Background(), items)
	for _, c := range calls {
		for _, k := range c.keys {
			if slot(k) != slot(c.keys[0]) {
				t.Fatalf("one call holds %q (slot %d) and %q (slot %d)", c.keys[0], slot(c.keys[0]), k, slot(k))
			}
		}
	}
	if len(calls) != len(slots) {
		t.Fatalf("%d names of %d slots renewed in %d calls", len(names), len(slots), len(calls))
	}
}

func TestRenewCallsGroupBySlotOfKey(t *testing.T) {
	for _, n := range braceNames {
		if err := keys.CheckName(n); err != nil {
			t.Fatalf("%q: %v", n, err)
		}
		checkSlots(t, Layout{Prefix: keys.DefaultPrefix}, n)
	}
	checkGrouping(t, keys.DefaultPrefix, braceNames)
	checkGrouping(t, "", braceNames)
}

// tagOf is what Cluster would hash of s alone: the text between its first
// '{' and the next '}' when not empty. The fuzz renews each name beside
// it, the name that grouping by the name's own slot would mix it with.
func tagOf(s string) string {
	if i := strings.IndexByte(s, '{'); i >= 0 {
		if j := strings.IndexByte(s[i+1:], '}'); j > 0 {
			return s[i+1 : i+1+j]
		}
	}
	return s
}

// For every name CheckName accepts, under any prefix CheckPrefix accepts,
// all of its keys share its lease key's slot, and renewals group by it.
func FuzzRenewCallsSlots(f *testing.F) {
	for _, n := range braceNames {
		f.Add("tenure:", n, "t")
	}
	f.Add("tenure:", "a}b{", "{}")
	f.Add("p:", "{{a}}", "\u00e9}\u00e8{")
	f.Add("", "\x00{\xff}", "日本{語}")
	f.Fuzz(func(t *testing.T, prefix, a, b string) {
		if keys.CheckPrefix(prefix) != nil || keys.CheckName(a) != nil || keys.CheckName(b) != nil {
			t.Skip()
		}
		l := Layout{Prefix: prefix}
		checkSlots(t, l, a)
		checkSlots(t, l, b)
		names := []string{a, b}
		for _, n := range []string{tagOf(a), tagOf(b)} {
			if keys.CheckName(n) == nil {
				names = append(names, n)
			}
		}
		checkGrouping(t, prefix, names)
	})
}
