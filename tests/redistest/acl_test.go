package redistest_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/tests/redistest"
)

// The rules CreateUser and the Cluster tests apply are the lines
// docs/security.md gives, word for word: the single server's (and a
// Sentinel group's data servers'), then the Cluster's.
func TestACLRuleMatchesDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{redistest.ACLRule("tenure", "PASSWORD", "tenure:"), redistest.ACLClusterRule("tenure", "PASSWORD", "tenure:")}
	var lines []string
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, "ACL SETUSER tenure on >PASSWORD") {
			lines = append(lines, l)
		}
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("docs/security.md's rule lines:\n%s\nwant exactly these:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	for _, w := range want {
		if strings.Contains(w, "+@all") || strings.Contains(w, " ~* ") || strings.Contains(w, "allkeys") || strings.Contains(w, "allchannels") {
			t.Fatalf("the rule grants everything: %s", w)
		}
	}
}

func TestCreateUser(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	ctx := ctxTimeout(t, 30*time.Second)
	u := s.CreateUser(t, "tenure", "tenure:")
	c := redis.NewClient(s.UserOptions(u))
	defer c.Close()
	if err := c.Set(ctx, "tenure:{a}", "1", 0).Err(); err != nil {
		t.Fatalf("a key under the prefix: %v", err)
	}
	for name, err := range map[string]error{
		"a key outside the prefix": c.Set(ctx, "other", "1", 0).Err(),
		"a command not granted":    c.FlushAll(ctx).Err(),
		"a channel outside":        c.Publish(ctx, "other", "x").Err(),
	} {
		if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Errorf("%s: %v, want NOPERM", name, err)
		}
	}
	if n := len(s.ACLLog(t)); n != 3 {
		t.Errorf("ACL LOG has %d entries, want 3: %q", n, s.ACLLog(t))
	}
	s.ResetACLLog(t)
	if l := s.ACLLog(t); len(l) != 0 {
		t.Errorf("ACL LOG after reset: %q", l)
	}

	// A second user of the same name is refused: the rule adds to an
	// existing user's rights.
	ft := &fakeTB{TB: t}
	func() {
		defer func() { _ = recover() }()
		s.CreateUser(ft, "tenure", "tenure:")
	}()
	if !ft.failed {
		t.Error("CreateUser of an existing user did not fail")
	}

	// Glob characters in a prefix match themselves only.
	g := s.CreateUser(t, "glob", "a*b:")
	gc := redis.NewClient(s.UserOptions(g))
	defer gc.Close()
	if err := gc.Set(ctx, "a*b:k", "1", 0).Err(); err != nil {
		t.Fatalf("a key under the prefix a*b: : %v", err)
	}
	if err := gc.Set(ctx, "aXb:k", "1", 0).Err(); err == nil {
		t.Fatal("prefix a*b: matched aXb:")
	}
}

// fakeTB records a Fatalf instead of ending the test.
type fakeTB struct {
	testing.TB
	failed bool
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(string, ...any) {
	f.failed = true
	panic("fatal")
}

// The checker finds a script that touches a key it was not given, or
// publishes on another name's channel, and passes one that does not.
func TestScriptKeyViolations(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	ctx := ctxTimeout(t, 30*time.Second)
	c := s.Client(t)
	m := s.Monitor(t)
	good := redis.NewScript(`redis.call('SET', KEYS[1], 'x'); redis.call('ZADD', KEYS[2], 1, 'm'); redis.call('TIME'); redis.call('PUBLISH', KEYS[1] .. ':released', 'r'); return 1`)
	if err := good.Run(ctx, c, []string{"t:{a b}", "t:{a b}:q"}).Err(); err != nil {
		t.Fatal(err)
	}
	_ = c.Set(ctx, "plain \"quoted\"\n", "\x00\xff", 0) // not a script: not checked, but parsed
	cmds := m.Stop(t)
	if v, err := redistest.ScriptKeyViolations(ctx, c, cmds); err != nil || len(v) != 0 {
		t.Fatalf("a good script: %q, %v", v, err)
	}
	if !slices.ContainsFunc(cmds, func(c redistest.Command) bool {
		return len(c.Args) == 3 && c.Args[1] == "plain \"quoted\"\n" && c.Args[2] == "\x00\xff"
	}) {
		t.Fatalf("MONITOR's quoting was not undone: %q", cmds)
	}

	m = s.Monitor(t)
	bad := redis.NewScript(`redis.call('GET', KEYS[1]); redis.call('DEL', KEYS[1] .. ':other'); redis.call('PUBLISH', 'elsewhere', 'r'); return 1`)
	if err := bad.Run(ctx, c, []string{"t:{a}"}).Err(); err != nil {
		t.Fatal(err)
	}
	v, err := redistest.ScriptKeyViolations(ctx, c, m.Stop(t))
	if err != nil || len(v) != 2 || !strings.Contains(v[0], `"t:{a}:other"`) || !strings.Contains(v[1], `"elsewhere"`) {
		t.Fatalf("a script touching a key not given and another channel: %q, %v", v, err)
	}

	if _, err := redistest.ScriptKeyViolations(context.Background(), c, nil); err == nil {
		t.Fatal("no script at all passed the check")
	}
}
