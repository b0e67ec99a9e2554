package main

// Fuzz tests of what parses user input (durations, --wait, --redis) and of
// the redaction of secrets, with their table tests.

import (
	"net"
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

// FuzzParseTarget: every form --redis takes parses into a deployment with
// somewhere to connect, or into an error that never shows a password.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{
		"redis-sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster", "rediss-sentinel://u:pw@h:1/m?db=2",
		"redis-sentinel://h:1", "redis-sentinel://h:1/m?db=-1", "redis-cluster://127.0.0.1:7000,[::1]:7001",
		"rediss-cluster://u:pw@h:7000/", "redis-cluster://h:1/0", "redis-cluster://u:p%zz@h:1", "redis-cluster://,",
		"redis://127.0.0.1:6379", "localhost:6379", "REDIS-CLUSTER://h:1", "redis-sentinel://u:secret@h:1/m#x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := parseTarget(s)
		if err != nil {
			if tg != nil {
				t.Fatal("a target with an error")
			}
			if at := strings.LastIndex(s, "@"); at >= 0 {
				if _, rest, ok := strings.Cut(s[:at], "://"); ok && len(rest) >= 4 && strings.Contains(err.Error(), rest) {
					t.Fatalf("parseTarget(%q): the error shows the user information: %v", s, err)
				}
			}
			return
		}
		switch tg.kind {
		case kindServer:
			if tg.opts == nil || tg.opts.Addr == "" {
				t.Fatalf("parseTarget(%q): no address", s)
			}
		case kindSentinel, kindCluster:
			if len(tg.addrs) == 0 {
				t.Fatalf("parseTarget(%q): no address", s)
			}
			for _, a := range tg.addrs {
				if _, _, err := net.SplitHostPort(a); err != nil {
					t.Fatalf("parseTarget(%q): address %q: %v", s, a, err)
				}
			}
			// A Sentinel URL may lack its master name: connecting then
			// names the masters the sentinels monitor (noMaster).
			if tg.kind == kindCluster && tg.master != "" {
				t.Fatalf("parseTarget(%q): kind %s with master %q", s, tg.kind, tg.master)
			}
		default:
			t.Fatalf("parseTarget(%q): kind %q", s, tg.kind)
		}
		if strings.Contains(tg.where(), "@") && !strings.Contains(tg.master, "@") {
			t.Fatalf("parseTarget(%q): where %q shows user information", s, tg.where())
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

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`redis at redis://u:pw@h:1: refused`, `redis at redis://xxxxx@h:1: refused`},
		{`parse "rediss://:p@ss@h:1/0": bad`, `parse "rediss://xxxxx@h:1/0": bad`},
		{`two: redis://a:b@h and unix://c:d@/tmp/s`, `two: redis://xxxxx@h and unix://xxxxx@/tmp/s`},
		{`no user: redis://h:1/0`, `no user: redis://h:1/0`},
		{`a secret: hunter22, again hunter22`, `a secret: xxxxx, again xxxxx`},
		// Redis quotes a command's arguments, an acquire's token among them.
		{`x: ERR unknown command 'evalsha', with args beginning with: 'b2c7' '5' 'tenure:{x}:retired:8372cb9b'` + "\nnext",
			`x: ERR unknown command 'evalsha', with args beginning with: (not shown)` + "\nnext"},
	} {
		if got := redact(tc.in, []string{"hunter22", "abc"}); got != tc.want {
			t.Errorf("redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// Secrets under 4 bytes are left: they would mask ordinary words.
	if got := redact("abc def", []string{"abc"}); got != "abc def" {
		t.Errorf("a 3-byte secret masked: %q", got)
	}
}

// FuzzRedact: whatever surrounds a URL, its password does not survive
// redact (passwords without spaces: a space ends a URL in a message, and
// there the literal pass, with the known password, takes over), nor does
// a known secret anywhere.
func FuzzRedact(f *testing.F) {
	f.Add("prefix ", "p@ss:word", " suffix", "redis")
	f.Add(`"`, "x", `": error`, "rediss")
	f.Fuzz(func(t *testing.T, before, pw, after, scheme string) {
		if pw == "" || strings.ContainsAny(pw, " \t\r\n\v\f\u0085\u00a0x") || strings.Contains("xxxxx@", pw) {
			return
		}
		if scheme == "" || !userinfoScheme.MatchString(scheme) {
			return
		}
		s := before + " " + scheme + "://user:" + pw + "@host:1" + " " + after
		if got := redact(s, nil); strings.Contains(got, "user:"+pw+"@") {
			t.Fatalf("redact(%q) = %q keeps the password", s, got)
		}
		if len(pw) >= 4 && !strings.Contains("xxxxx", pw) {
			if got := redact(before+pw+after, []string{pw}); strings.Contains(got, pw) && !strings.Contains(before+after, pw) {
				t.Fatalf("redact(%q, %q) = %q keeps the secret", before+pw+after, pw, got)
			}
		}
	})
}
