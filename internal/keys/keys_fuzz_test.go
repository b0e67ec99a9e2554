package keys

import (
	"strings"
	"testing"
)

// allKeys returns every key and channel of name under l, labelled, with id
// as the Retired marker's id; AcquireKeys and ReleaseKeys, which scripts
// are given, must agree with them.
func allKeys(t *testing.T, l Layout, name, id string) map[string]string {
	t.Helper()
	k := map[string]string{
		"Lease":         l.Lease(name),
		"Fence":         l.Fence(name),
		"Channel":       l.Channel(name),
		"Retired":       l.Retired(name, id),
		"Queue":         l.Queue(name),
		"QueueExpiry":   l.QueueExpiry(name),
		"Permits":       l.Permits(name),
		"Leader":        l.Leader(name),
		"LeaderChanged": l.LeaderChanged(name),
	}
	acq := l.AcquireKeys(name, id)
	if want := []string{k["Lease"], k["Fence"], k["Retired"], k["Queue"], k["QueueExpiry"]}; !equal(acq, want) {
		t.Fatalf("AcquireKeys(%q, %q) = %q, want %q", name, id, acq, want)
	}
	if pk := l.PermitKeys(name, id); !equal(pk, append(acq, k["Permits"])) {
		t.Fatalf("PermitKeys(%q, %q) = %q", name, id, pk)
	}
	if rel := l.ReleaseKeys(name, id); !equal(rel, []string{k["Lease"], k["Retired"]}) {
		t.Fatalf("ReleaseKeys(%q, %q) = %q", name, id, rel)
	}
	return k
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzLayoutInjective: for any prefix and any two valid names, whatever
// bytes they hold, and any marker ids without '}', no key or channel of
// one name equals any of the other's, nor do two kinds of one name's keys
// meet, and NameOf gives the name back from its lease key and only from
// it. The reason it holds: every key is P{N}T where P holds no brace
// (CheckPrefix) and T, the part after the name, holds none either, so the
// last '}' of a key ends the name; the fuzz checks that argument (name is
// what lies between P{ and the last '}') as well as its consequence.
//
// Marker ids are tenure's tokens: 32 hex digits, followed with WithHolder
// by '.' and the holder identity, which lease.WithHolder refuses when it
// holds a brace. An id holding '}' would break the argument:
// TestRetiredIDWithBrace shows the collision it would allow.
func FuzzLayoutInjective(f *testing.F) {
	f.Add("tenure:", "a", "b", "t1", "t2")
	f.Add("tenure:", "a", "a}:fence", "x", "x")
	f.Add("tenure:", "a", "a}", "x", "x")
	f.Add("tenure:", "a}:retired:x", "a", "x", "x")
	f.Add("tenure:", "a}:queue", "a", "x", ":expiry")
	f.Add("tenure:", "a}:leader", "a", "x", "x")
	f.Add("", "{a", "a", "0123456789abcdef0123456789abcdef.host/1", "x")
	f.Add("p:", "a{b}c", "a{b", "}c", "x")
	f.Add("p:", "\x00\xff", "\u00e9}", "", "")
	f.Fuzz(func(t *testing.T, prefix, n1, n2, id1, id2 string) {
		if CheckPrefix(prefix) != nil || CheckName(n1) != nil || CheckName(n2) != nil {
			return
		}
		if strings.Contains(id1, "}") || strings.Contains(id2, "}") {
			return // see TestRetiredIDWithBrace
		}
		l := Layout{Prefix: prefix}
		k1, k2 := allKeys(t, l, n1, id1), allKeys(t, l, n2, id2)
		for _, ks := range []struct {
			name string
			keys map[string]string
		}{{n1, k1}, {n2, k2}} {
			seen := map[string]string{}
			for kind, k := range ks.keys {
				if other, dup := seen[k]; dup {
					t.Fatalf("name %q: %s and %s are both %q", ks.name, kind, other, k)
				}
				seen[k] = kind
				rest, ok := strings.CutPrefix(k, prefix+"{")
				last := strings.LastIndexByte(rest, '}')
				if !ok || last < 0 || rest[:last] != ks.name {
					t.Fatalf("%s of %q is %q: the name is not what lies between %q and the last '}'", kind, ks.name, k, prefix+"{")
				}
				got, isLease := l.NameOf(k)
				if kind == "Lease" && (!isLease || got != ks.name) {
					t.Fatalf("NameOf(Lease(%q)) = %q, %v", ks.name, got, isLease)
				}
				if kind != "Lease" && isLease && got == ks.name {
					t.Fatalf("NameOf(%s(%q)) = %q: taken for the lease key", kind, ks.name, got)
				}
			}
		}
		if n1 == n2 {
			return
		}
		for kind1, a := range k1 {
			for kind2, b := range k2 {
				if a == b {
					t.Fatalf("%s(%q) = %s(%q) = %q", kind1, n1, kind2, n2, a)
				}
			}
		}
	})
}

// A marker id holding '}' would let two names' keys meet: the marker of
// an acquire by "a" whose token ends in "}" is the lease key of a name
// that holds that token. This is why lease.WithHolder refuses identities
// with braces (lease's TestHolderIdentityRejected); the test pins the
// layout's own limit down, so that a change to it is seen.
func TestRetiredIDWithBrace(t *testing.T) {
	l := Layout{Prefix: DefaultPrefix}
	token := "0123456789abcdef0123456789abcdef.h}"
	other := "a}:retired:0123456789abcdef0123456789abcdef.h"
	if err := CheckName(other); err != nil {
		t.Fatalf("%q: %v", other, err)
	}
	if l.Retired("a", token) != l.Lease(other) {
		t.Fatalf("Retired(a, %q) = %q, Lease(%q) = %q: no longer equal; update the fuzz's precondition and docs/security.md",
			token, l.Retired("a", token), other, l.Lease(other))
	}
}
