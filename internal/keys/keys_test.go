package keys

import (
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The layout is a wire format: keys written by one version are read and
// expired by the next, and by operators' tools. A change here must be
// deliberate.
func TestLayout(t *testing.T) {
	l := Layout{Prefix: DefaultPrefix}
	for got, want := range map[string]string{
		l.Lease("job"):          "tenure:{job}",
		l.Fence("job"):          "tenure:{job}:fence",
		l.Channel("job"):        "tenure:{job}:released",
		l.Retired("job", "t1"):  "tenure:{job}:retired:t1",
		l.Queue("job"):          "tenure:{job}:queue",
		l.QueueExpiry("job"):    "tenure:{job}:queue:expiry",
		l.Leader("job"):         "tenure:{job}:leader",
		l.LeaderChanged("job"):  "tenure:{job}:leader:changed",
		Layout{}.Lease("job"):   "{job}",
		Layout{"a:"}.Fence("b"): "a:{b}:fence",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if RetiredFree(time.Second) != time.Second || RetiredFree(0) != RetiredFor || RetiredFree(time.Minute) != RetiredFor {
		t.Errorf("RetiredFree: a release's marker must live min(RetiredFor, TTL), RetiredFor when the TTL is unknown")
	}
}

func TestCheck(t *testing.T) {
	for name, want := range map[string]string{
		"job":                             "",
		strings.Repeat("x", MaxNameLen):   "",
		"a}b":                             "",
		"{x}":                             "",
		"":                                "empty",
		strings.Repeat("x", MaxNameLen+1): "1025 bytes, over the 1024-byte limit",
		"bad\xff":                         `"bad\xff" is not valid UTF-8`,
		"}x":                              `"}x" starts with '}'`,
	} {
		if err := CheckName(name); (err == nil) != (want == "") || (err != nil && err.Error() != want) {
			t.Errorf("CheckName(%.20q) = %v, want %q", name, err, want)
		}
	}
	for prefix, want := range map[string]string{
		"tenure:": "",
		"":        "",
		"a{":      `"a{" contains a brace`,
		"}":       `"}" contains a brace`,
		"a\xff":   "is not valid UTF-8",
	} {
		if err := CheckPrefix(prefix); (err == nil) != (want == "") || (err != nil && err.Error() != want) {
			t.Errorf("CheckPrefix(%q) = %v, want %q", prefix, err, want)
		}
	}
}

func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"job", "", "}x", "a}b", "{x}", "bad\xff", "ünïcode", "x\x00y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := CheckName(name)
		valid := name != "" && len(name) <= MaxNameLen && utf8.ValidString(name) && name[0] != '}'
		if valid != (err == nil) {
			t.Fatalf("CheckName(%q) = %v, valid %v", name, err, valid)
		}
	})
}

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

// all returns every key and channel of name.
func (l Layout) all(name string) []string {
	return []string{l.Lease(name), l.Fence(name), l.Channel(name), l.Retired(name, "t"),
		l.Queue(name), l.QueueExpiry(name), l.Leader(name), l.LeaderChanged(name)}
}

// Every key of one name must hash to one Cluster slot, and different names
// or different kinds of key must never share a key.
func FuzzLayout(f *testing.F) {
	f.Add("tenure:", "job", "job2")
	f.Add("tenure:", "a}b", "a}c")
	f.Add("tenure:", "{x}", "x")
	f.Add("tenure:", "a}:fence", "a")
	f.Add("tenure:", "a}:queue", "a}")
	f.Add("", "", "}")
	f.Fuzz(func(t *testing.T, prefix, a, b string) {
		if CheckPrefix(prefix) != nil || CheckName(a) != nil || CheckName(b) != nil {
			t.Skip()
		}
		l := Layout{Prefix: prefix}
		keysA := l.all(a)
		for _, k := range keysA[1:] {
			if hashTag(k) != hashTag(keysA[0]) {
				t.Fatalf("name %q: %q and %q in different slots", a, keysA[0], k)
			}
		}
		seen := map[string]bool{}
		for _, k := range keysA {
			if seen[k] {
				t.Fatalf("name %q: two kinds of key are %q", a, k)
			}
			seen[k] = true
		}
		if a == b {
			return
		}
		// A name may hold "}:fence", but no suffix holds a brace, so
		// P{a}S = P{b}S' only if a = b.
		for _, k := range l.all(b) {
			if seen[k] {
				t.Fatalf("names %q and %q share the key %q", a, b, k)
			}
		}
	})
}

// NameOf inverts Lease, and never takes another kind of key of a name for
// the lease key of a different name.
func FuzzNameOf(f *testing.F) {
	for _, s := range []string{"job", "a}b", "x}:fence", "{", "}", "ünï"} {
		f.Add("tenure:", s)
	}
	f.Add("", "n")
	f.Fuzz(func(t *testing.T, prefix, name string) {
		if CheckName(name) != nil || CheckPrefix(prefix) != nil {
			return
		}
		l := Layout{Prefix: prefix}
		got, ok := l.NameOf(l.Lease(name))
		if !ok || got != name {
			t.Fatalf("NameOf(Lease(%q)) = %q, %v", name, got, ok)
		}
		for _, k := range l.all(name)[1:] {
			if n, ok := l.NameOf(k); ok && CheckName(n) == nil && l.Lease(n) != k {
				t.Fatalf("%q taken for the lease key of %q", k, n)
			}
		}
	})
}

// The hot path's key builders give exactly the layout's keys, and the
// release channel is the lock key plus ":released", which release.lua
// derives from KEYS[1] rather than taking as an argument.
func TestHotPathKeysMatchTheLayout(t *testing.T) {
	for _, l := range []Layout{{Prefix: DefaultPrefix}, {Prefix: ""}, {Prefix: "app:"}} {
		for _, name := range []string{"job", "a}b", "account:42", "é"} {
			got := l.AcquireKeys(name, "tok")
			want := []string{l.Lease(name), l.Fence(name), l.Retired(name, "tok"), l.Queue(name), l.QueueExpiry(name)}
			if !slices.Equal(got, want) {
				t.Errorf("AcquireKeys(%q) = %q, want %q", name, got, want)
			}
			if got, want := l.ReleaseKeys(name, "op"), []string{l.Lease(name), l.Retired(name, "op")}; !slices.Equal(got, want) {
				t.Errorf("ReleaseKeys(%q) = %q, want %q", name, got, want)
			}
			if l.Channel(name) != l.Lease(name)+":released" {
				t.Errorf("Channel(%q) = %q: release.lua derives it as the lock key + \":released\"", name, l.Channel(name))
			}
		}
	}
}
