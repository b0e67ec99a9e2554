package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ACLCommands are the commands a least-privilege tenure user is allowed,
// in the order docs/security.md's rule lists them: everything the library,
// its Lua scripts and the tenure command send (docs/security.md says which
// feature needs which). TestACLRuleMatchesDocs keeps the two the same.
var ACLCommands = []string{
	// Connection: go-redis's PING, pub/sub's health check, the CLI's probe;
	// SELECT of a database above 0 (Options.DB, redis://host/2).
	"ping", "select",
	// Scripts, and what they call. SCRIPT LOAD tells a program in FIPS
	// 140-3 mode a script's SHA1, which Go may not compute there.
	"evalsha", "eval", "script|load", "time",
	"get", "set", "del", "exists", "type", "pttl", "pexpire",
	"hget", "hset", "hdel", "hexists", "hincrby", "hgetall", "hmget",
	"zadd", "zrem", "zrank", "zcard", "zscore", "zcount", "zrange", "zrangebyscore",
	// Lease.Exec and election's reads.
	"watch", "unwatch", "multi", "exec",
	// WithReplicaAcks.
	"wait",
	// Release messages: classic, and sharded on a Cluster.
	"publish", "subscribe", "unsubscribe", "spublish", "ssubscribe", "sunsubscribe",
	// tenure list.
	"scan",
}

// ACLIdentityCommands are what go-redis v9 sends on every new connection
// to a server that knows it, besides what ACLCommands allow: CLIENT
// SETINFO, the client library's name and version (Redis 7.2 and later,
// Valkey). It ignores a refusal, but each refusal is an ACL LOG entry.
// Redis 6.2 and 7.0 do not know the subcommand, and refuse a rule that
// names it: docs/security.md gives each rule with them (for 7.2 and later)
// and without (for 6.2 and 7.0), and Server.FitRule picks.
var ACLIdentityCommands = []string{"client|setinfo"}

// ACLClusterCommands are what a Cluster client sends besides ACLCommands,
// in the order docs/security.md's Cluster rule adds them: the slot map
// (CLUSTER SLOTS), the command table (COMMAND, for the key positions of
// commands) and ASKING after an ASK redirection (go-redis v9.23).
var ACLClusterCommands = []string{"cluster|slots", "command", "asking"}

// ACLClusterRule is the one-line rule of docs/security.md for a tenure-only
// user on a Redis Cluster: ACLRule and ACLClusterCommands.
func ACLClusterRule(user, password, prefix string) string {
	var b strings.Builder
	b.WriteString(ACLRule(user, password, prefix))
	for _, c := range ACLClusterCommands {
		b.WriteString(" +")
		b.WriteString(c)
	}
	return b.String()
}

// ACLRule is the one-line rule of docs/security.md for a tenure-only user
// named user, with password password (PASSWORD in the document), whose
// keys and channels start with prefix: every key and channel tenure
// writes starts with the prefix, and every command it sends is allowed,
// none other.
func ACLRule(user, password, prefix string) string {
	p := escapeGlob(prefix)
	var b strings.Builder
	fmt.Fprintf(&b, "ACL SETUSER %s on >%s resetkeys ~%s* resetchannels &%s* -@all", user, password, p, p)
	for _, c := range ACLCommands {
		b.WriteString(" +")
		b.WriteString(c)
	}
	return b.String()
}

// WithIdentity returns rule (ACLRule's or ACLClusterRule's) with
// ACLIdentityCommands: the line docs/security.md gives for Redis 7.2 and
// later and for Valkey.
func WithIdentity(rule string) string {
	for _, c := range ACLIdentityCommands {
		rule += " +" + c
	}
	return rule
}

// FitRule returns rule (ACLRule's or ACLClusterRule's) as docs/security.md
// gives it for s: WithIdentity when s knows CLIENT SETINFO.
func (s *Server) FitRule(tb testing.TB, rule string) string {
	tb.Helper()
	if s.KnowsIdentity(tb) {
		return WithIdentity(rule)
	}
	return rule
}

// IdentityCommands returns ACLIdentityCommands when s knows them, else
// nothing: what a test's own narrower user needs besides ACLCommands.
func (s *Server) IdentityCommands(tb testing.TB) []string {
	tb.Helper()
	if s.KnowsIdentity(tb) {
		return ACLIdentityCommands
	}
	return nil
}

// KnowsIdentity reports whether s knows every command of
// ACLIdentityCommands (COMMAND INFO answers nil for one it does not).
func (s *Server) KnowsIdentity(tb testing.TB) bool {
	tb.Helper()
	c := s.NewClient()
	defer c.Close()
	args := []any{"command", "info"}
	for _, cmd := range ACLIdentityCommands {
		args = append(args, cmd)
	}
	info, err := c.Do(context.Background(), args...).Slice()
	if err != nil {
		tb.Fatalf("redistest: COMMAND INFO: %v", err)
	}
	return !slices.Contains(info, nil)
}

// escapeGlob escapes the characters that Redis's glob patterns give a
// meaning to, so that a prefix matches itself only.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// User is a least-privilege ACL user on a test server.
type User struct {
	Name, Password string
}

// CreateUser creates user on the server with exactly ACLRule for prefix
// (the line docs/security.md gives, FitRule's for the server) and a fresh random password, sent as
// the default user, which the harness's servers leave unrestricted. The
// user must not exist yet: the rule adds to an existing user's rights. It
// fails the test on error.
func (s *Server) CreateUser(tb testing.TB, user, prefix string) User {
	tb.Helper()
	u := User{Name: user, Password: randomPassword()}
	c := s.NewClient()
	defer c.Close()
	ctx := context.Background()
	if n, err := c.Do(ctx, "acl", "users").StringSlice(); err != nil || slices.Contains(n, user) {
		tb.Fatalf("redistest.CreateUser: user %q exists already, or ACL USERS failed: %v", user, err)
	}
	var args []any
	for _, f := range strings.Fields(s.FitRule(tb, ACLRule(user, u.Password, prefix))) {
		args = append(args, f)
	}
	if err := c.Do(ctx, args...).Err(); err != nil {
		tb.Fatalf("redistest: %s: %v", s.FitRule(tb, ACLRule(user, "PASSWORD", prefix)), err)
	}
	return u
}

// ACLLog returns the server's ACL LOG (newest first): every command,
// key, channel or authentication refused since the last ResetACLLog, each
// entry as "reason context object username", e.g. "command lua set alice".
// Refusals that go-redis swallows (it ignores a refused CLIENT SETINFO)
// show here too.
func (s *Server) ACLLog(tb testing.TB) []string {
	tb.Helper()
	c := s.NewClient()
	defer c.Close()
	entries, err := c.ACLLog(context.Background(), 128).Result()
	if err != nil {
		tb.Fatalf("redistest: ACL LOG: %v", err)
	}
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = fmt.Sprintf("%s %s %s %s", e.Reason, e.Context, e.Object, e.Username)
	}
	return out
}

// ResetACLLog empties the server's ACL LOG.
func (s *Server) ResetACLLog(tb testing.TB) {
	tb.Helper()
	c := s.NewClient()
	defer c.Close()
	if err := c.ACLLogReset(context.Background()).Err(); err != nil {
		tb.Fatalf("redistest: ACL LOG RESET: %v", err)
	}
}

// SetUser runs ACL SETUSER with rules after a reset (so that nothing of an
// earlier rule is left), as the default user; rules[0] is the user's name.
// Tests use it for users narrower than ACLRule.
func (s *Server) SetUser(tb testing.TB, rules ...string) {
	tb.Helper()
	if len(rules) == 0 {
		tb.Fatal("redistest.SetUser: no user name")
	}
	c := s.NewClient()
	defer c.Close()
	args := []any{"acl", "setuser", rules[0], "reset"}
	for _, r := range rules[1:] {
		args = append(args, r)
	}
	if err := c.Do(context.Background(), args...).Err(); err != nil {
		tb.Fatalf("redistest: ACL SETUSER %s: %v", rules[0], err)
	}
}

// UserOptions returns the server's client options (Options) authenticated
// as u.
func (s *Server) UserOptions(u User) *redis.Options {
	o := s.Options()
	o.Username, o.Password = u.Name, u.Password
	return o
}

func randomPassword() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// UserClient creates docs/security.md's user for prefix on s (CreateUser)
// and returns a client authenticated as it, closed when the test ends.
func (s *Server) UserClient(tb testing.TB, prefix string) *redis.Client {
	tb.Helper()
	c := redis.NewClient(s.UserOptions(s.CreateUser(tb, "tenure", prefix)))
	tb.Cleanup(func() { _ = c.Close() })
	return c
}
