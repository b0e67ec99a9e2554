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
// Sentinel group's data servers'), then the Cluster's, each for Redis 7.2
// and later and Valkey (WithIdentity), then for 6.2 and 7.0.
func TestACLRuleMatchesDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	single, cluster := redistest.ACLRule("tenure", "PASSWORD", "tenure:"), redistest.ACLClusterRule("tenure", "PASSWORD", "tenure:")
	want := []string{redistest.WithIdentity(single), single, redistest.WithIdentity(cluster), cluster}
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

// go-redis's CLIENT SETINFO on connecting is what the identity commands
// are for. The line docs/security.md gives for the server lets a client
// connect and work with nothing in ACL LOG; so does the 6.2 and 7.0 line
// with Options.DisableIdentity, on any server. On a server that knows
// CLIENT SETINFO (7.2 and later, Valkey) the 6.2 and 7.0 line alone
// leaves an entry a connection, which the ACL tests fail on; a server
// that does not refuses a rule naming it, with the error the document
// quotes.
func TestACLIdentity(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	ctx := ctxTimeout(t, 30*time.Second)
	admin := s.Client(t)
	run := func(rule string, disable bool) []string {
		t.Helper()
		s.ResetACLLog(t)
		if err := admin.Do(ctx, "acl", "deluser", "tenure").Err(); err != nil {
			t.Fatal(err)
		}
		var args []any
		for _, f := range strings.Fields(rule) {
			args = append(args, f)
		}
		if err := admin.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%s: %v", rule, err)
		}
		o := s.Options()
		o.Username, o.Password, o.DisableIdentity = "tenure", "pw", disable
		c := redis.NewClient(o)
		defer c.Close()
		if err := c.Set(ctx, "tenure:{a}", "1", 0).Err(); err != nil {
			t.Fatalf("%s: SET: %v", rule, err)
		}
		return s.ACLLog(t)
	}
	base := redistest.ACLRule("tenure", "pw", "tenure:")
	if log := run(s.FitRule(t, base), false); len(log) != 0 {
		t.Errorf("the server's own line: ACL LOG %q", log)
	}
	if log := run(base, true); len(log) != 0 {
		t.Errorf("the 6.2 and 7.0 line with DisableIdentity: ACL LOG %q", log)
	}
	log := run(base, false)
	if !s.KnowsIdentity(t) {
		if len(log) != 0 {
			t.Errorf("the 6.2 and 7.0 line on a server without CLIENT SETINFO: ACL LOG %q", log)
		}
		err := admin.Do(ctx, "acl", "setuser", "tenure", "+client|setinfo").Err()
		if err == nil || !strings.Contains(err.Error(), "Unknown command or category name in ACL") {
			t.Errorf("+client|setinfo on a server without it: %v, want the refusal docs/security.md quotes", err)
		}
		return
	}
	if len(log) != 1 || !strings.Contains(log[0], "client|setinfo") {
		t.Errorf("the 6.2 and 7.0 line on a server with CLIENT SETINFO: ACL LOG %q, want one client|setinfo refusal", log)
	}
}
