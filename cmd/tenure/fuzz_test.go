package main

import (
	"strings"
	"testing"
	"time"
)

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"0", "30s", "1m30s", "500ms", "1.5", " 2 ", "-1s", "-0", "NaN", "Inf", "1e300", "9223372036s", "", "forever", "+3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDuration(s)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("parseDuration(%q) = %v, negative", s, d)
		}
		// What it prints, it reads back the same.
		if d2, err := parseDuration(d.String()); err != nil || d2 != d {
			t.Fatalf("round trip of %v: %v, %v", d, d2, err)
		}
	})
}

func FuzzParseWait(f *testing.F) {
	for _, s := range []string{"forever", "INF", "0", "10s", "-5s", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var w waitFlag
		if err := w.Set(s); err != nil {
			return
		}
		var w2 waitFlag
		if err := w2.Set(w.String()); err != nil || w2 != w {
			t.Fatalf("round trip of %q: %+v then %+v, %v", s, w, w2, err)
		}
		if !w.forever && w.d < 0 {
			t.Fatalf("negative wait %v", w.d)
		}
	})
}

func FuzzParseRedis(f *testing.F) {
	for _, s := range []string{
		"redis://127.0.0.1:6379", "rediss://user:pw@host:6380/2", "redis://:pw@host/0?dial_timeout=3s",
		"unix:///tmp/redis.sock?db=1", "localhost:6379", "[::1]:6379", "host", "http://x", "redis://h:p", "",
		"redis://host:6379/notadb", "a b:1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		opts, err := parseRedis(s)
		if err != nil {
			if opts != nil {
				t.Fatal("options with an error")
			}
			return
		}
		if opts.Addr == "" {
			t.Fatalf("parseRedis(%q): no address", s)
		}
		if !strings.Contains(s, "://") && opts.Addr != s {
			t.Fatalf("parseRedis(%q): host:port became %q", s, opts.Addr)
		}
	})
}

// TestEscapeGlob: an escaped string holds no unescaped glob character.
func TestEscapeGlob(t *testing.T) {
	got := escapeGlob(`a*b?c[d]e\f`)
	if want := `a\*b\?c\[d\]e\\f`; got != want {
		t.Errorf("escapeGlob = %q, want %q", got, want)
	}
	_ = time.Second
}
