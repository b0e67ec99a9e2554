package backend

import (
	"strings"
	"testing"
)

// hashTag is the part of key that Redis Cluster hashes to pick a slot: the
// text between the first '{' and the next '}' when it is not empty, else the
// whole key. Keys with equal tags share a slot.
func hashTag(key string) string {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			return key[s+1 : s+1+e]
		}
	}
	return key
}

// Every key of one name must hash to one Cluster slot, and different names
// or different kinds of key must never share a key.
func FuzzLayout(f *testing.F) {
	f.Add("job", "job2")
	f.Add("a}b", "a}c")
	f.Add("{x}", "x")
	f.Add("a}:fence", "a")
	f.Add("", "}")
	f.Fuzz(func(t *testing.T, a, b string) {
		// Names lease accepts: not empty, not starting with '}' (whose
		// empty hash tag would scatter the name's keys over slots).
		if a == "" || b == "" || a[0] == '}' || b[0] == '}' {
			t.Skip()
		}
		l := Layout{Prefix: "tenure:"}
		keysA := []string{l.Lease(a), l.Fence(a), l.Retired(a, "t")}
		for _, k := range keysA[1:] {
			if hashTag(k) != hashTag(keysA[0]) {
				t.Fatalf("name %q: %q and %q in different slots", a, keysA[0], k)
			}
		}
		if a == b {
			return
		}
		if l.Lease(a) == l.Lease(b) || l.Fence(a) == l.Fence(b) || l.Channel(a) == l.Channel(b) {
			t.Fatalf("names %q and %q share a key", a, b)
		}
		if l.Lease(a) == l.Fence(b) || l.Lease(a) == l.Retired(b, "t") || l.Fence(a) == l.Retired(b, "t") {
			t.Fatalf("keys of %q and %q collide across kinds", a, b)
		}
	})
}
