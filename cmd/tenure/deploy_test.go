package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/redistest"
	"github.com/tenure-go/tenure/lease"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in                   string
		kind, master         string
		addrs                []string
		db                   int
		user, password       string
		tls                  bool
		singleAddr, errMatch string
	}{
		{in: "redis-sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster", kind: kindSentinel, master: "mymaster",
			addrs: []string{"127.0.0.1:26379", "127.0.0.1:26380"}},
		{in: "rediss-sentinel://u:p%40ss@h1:1/m?db=3", kind: kindSentinel, master: "m", addrs: []string{"h1:1"}, db: 3,
			user: "u", password: "p@ss", tls: true},
		{in: "redis-cluster://:pw@[::1]:7000,127.0.0.1:7001", kind: kindCluster, addrs: []string{"[::1]:7000", "127.0.0.1:7001"}, password: "pw"},
		{in: "rediss-cluster://u:pw@h:7000/", kind: kindCluster, addrs: []string{"h:7000"}, user: "u", password: "pw", tls: true},
		{in: "redis://u:pw@h:6379/2", kind: kindServer, user: "u", password: "pw", singleAddr: "h:6379"},
		{in: "h:6379", kind: kindServer, singleAddr: "h:6379"},
		{in: "redis-sentinel://h:1", errMatch: "the path must be the master name"},
		{in: "redis-sentinel://h:1/m/x", errMatch: "the path must be the master name"},
		{in: "redis-sentinel://h:1/m?db=x", errMatch: `db="x" is no database number`},
		{in: "redis-sentinel://h:1/m?dial_timeout=1", errMatch: "the only query parameter is db=N"},
		{in: "redis-cluster://h:1/2", errMatch: "a Cluster URL takes no path"},
		{in: "redis-cluster://h:1,h/", errMatch: `"h" is not host:port`},
		{in: "redis-cluster://h:1,,h:2", errMatch: `"" is not host:port`},
		{in: "redis-cluster://h:99999", errMatch: "no port from 1 to 65535"},
		{in: "redis-cluster://", errMatch: "is not host:port"},
		{in: "redis-cluster://u:secret%zz@h:1", errMatch: "not shown: it has user information"},
		{in: "redis-cluster://u:secretpw@h", errMatch: "not shown: it has user information"},
	} {
		got, err := parseTarget(tc.in)
		if tc.errMatch != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errMatch) {
				t.Errorf("parseTarget(%q): error %v, want one with %q", tc.in, err, tc.errMatch)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("parseTarget(%q): the error shows the password: %v", tc.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseTarget(%q): %v", tc.in, err)
			continue
		}
		if got.kind != tc.kind || got.master != tc.master || got.db != tc.db || got.user != tc.user ||
			got.password != tc.password || (got.tls != nil) != tc.tls || fmt.Sprint(got.addrs) != fmt.Sprint(tc.addrs) {
			t.Errorf("parseTarget(%q) = %+v", tc.in, got)
		}
		if tc.singleAddr != "" && got.opts.Addr != tc.singleAddr {
			t.Errorf("parseTarget(%q): address %q", tc.in, got.opts.Addr)
		}
	}
}

// TestConnUsageErrors: mistakes in the connection flags are usage errors
// that say what to do, before any connection.
func TestConnUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		what string
		env  []string
		args []string
		msg  string
	}{
		{"a user without a password", []string{"REDIS_URL=redis://someone@127.0.0.1:1"}, nil,
			"names user \"someone\" but no password: give it in the URL (USER:PASSWORD before the @, percent-encoded), " +
				"in --redis-password-file FILE, or in $TENURE_REDIS_PASSWORD"},
		{"a Sentinel user without a password", nil, []string{"--redis", "redis-sentinel://someone@127.0.0.1:1/m"}, "but no password"},
		{"a Cluster user without a password", nil, []string{"--redis", "redis-cluster://someone@127.0.0.1:1"}, "but no password"},
		{"the same server twice", nil, []string{"--redis", "127.0.0.1:1", "--redis", "redis://127.0.0.1:1"}, "is given twice"},
		{"TLS files without TLS", []string{"TENURE_TLS_CA=/nonexistent"}, []string{"--redis", "redis-cluster://127.0.0.1:1"},
			"need a rediss URL"},
		// The dial's "invalid port" read as Redis unreachable (69).
		{"a port out of range", nil, []string{"--redis", "redis://127.0.0.1:99999"}, `port "99999" is not a number from 1 to 65535`},
		{"a bare port out of range", nil, []string{"--redis", "127.0.0.1:0"}, `port "0" is not a number from 1 to 65535`},
		{"a port out of range after a password", nil, []string{"--redis", "redis://u:secret-pw@127.0.0.1:70000"},
			`redis URL (not shown: it has user information): port "70000"`},
		{"a quorum observer", nil, []string{"--redis", "127.0.0.1:1", "--redis", "127.0.0.1:2", "--redis", "127.0.0.1:3"},
			"elect --observe is not supported in quorum mode"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			args := append(tc.args, "status", "x")
			if strings.Contains(tc.msg, "elect") {
				args = append(tc.args, "elect", "--observe", "x")
			}
			code, _, stderr := result(t, on(tc.env, args...))
			if code != exitUsage || !strings.Contains(stderr, tc.msg) {
				t.Errorf("status %d, want %d with %q: %s", code, exitUsage, tc.msg, stderr)
			}
		})
	}
}

// TestDefaultAddressHint: with neither --redis nor REDIS_URL, a refused
// connection to the default address says how to name another.
func TestDefaultAddressHint(t *testing.T) {
	if c, err := net.DialTimeout("tcp", "127.0.0.1:6379", time.Second); err == nil {
		c.Close()
		t.Skip("something listens on 127.0.0.1:6379")
	}
	code, _, stderr := result(t, on(nil, "status", "x"))
	if code != exitRedis || !strings.Contains(stderr, "no --redis and no REDIS_URL were given") ||
		!strings.Contains(stderr, "set --redis or REDIS_URL") {
		t.Errorf("status %d: %s", code, stderr)
	}
	code, _, stderr = result(t, on([]string{"REDIS_URL=redis://127.0.0.1:6379"}, "status", "x"))
	if code != exitRedis || strings.Contains(stderr, "set --redis or REDIS_URL") {
		t.Errorf("with REDIS_URL given: status %d: %s", code, stderr)
	}
}

// deployRound runs each operator and holder command of tenure against the
// deployment redisArgs (--redis flags) name, with env: run, elect (refused
// in quorum mode), a holder, status, list, release --force of the holder,
// which then exits 77. It returns every stderr written.
func deployRound(t *testing.T, redisArgs, env []string, tag string, quorum bool) string {
	t.Helper()
	var all strings.Builder
	check := func(want int, args ...string) string {
		t.Helper()
		code, out, stderr := result(t, on(env, append(append([]string(nil), redisArgs...), args...)...))
		all.WriteString(stderr)
		if code != want {
			t.Fatalf("%v: status %d, want %d; stderr: %s", args, code, want, stderr)
		}
		return out
	}
	check(0, "run", "--ttl", "5s", tag+"-run", "--", "true")
	check(0, "elect", "--ttl", "5s", "--identity", "e-"+tag, tag+"-elect", "--", "true")
	if quorum {
		check(exitUsage, "run", "-n", "2", tag+"-sem", "--", "true")
	}

	held := filepath.Join(t.TempDir(), "held")
	loop := `echo up >> "$1"; while :; do sleep 0.05; done`
	holder := on(env, append(append([]string(nil), redisArgs...),
		"run", "--ttl", "5s", "--holder", "h-"+tag, tag+"-held", "--", "sh", "-c", loop, "sh", held)...)
	var holderErr bytes.Buffer
	holder.Stderr = &holderErr
	startBackground(t, holder)
	waitFile(t, held, 1, 30*time.Second)

	out := check(0, "status", tag+"-held")
	if !regexp.MustCompile(`kind\s+lease`).MatchString(out) || !strings.Contains(out, "h-"+tag) {
		t.Errorf("status while held:\n%s", out)
	}
	if quorum && strings.Count(out, "\nnode ") != 3 {
		t.Errorf("status in quorum mode shows no line for each node:\n%s", out)
	}
	out = check(0, "list", tag+"-*")
	if !strings.Contains(out, tag+"-held") || !strings.Contains(out, "h-"+tag) || strings.Contains(out, tag+"-run") {
		t.Errorf("list:\n%s", out)
	}
	out = check(0, "release", "--force", tag+"-held")
	if !strings.Contains(out, fmt.Sprintf("removed the lease on %q", tag+"-held")) {
		t.Errorf("release --force:\n%s", out)
	}
	if code := exitOf(t, holder, 60*time.Second); code != exitLost {
		t.Errorf("the holder exited %d after release --force, want %d: %s", code, exitLost, holderErr.String())
	}
	all.WriteString(holderErr.String())
	out = check(0, "status", tag+"-held")
	if !regexp.MustCompile(`kind\s+free`).MatchString(out) {
		t.Errorf("status after release --force:\n%s", out)
	}
	return all.String()
}

// aclSetUser gives every server the least-privilege tenure user of
// docs/security.md's single-server line.
func aclSetUser(t *testing.T, servers []*redistest.Server, user, password string) {
	t.Helper()
	aclSetRule(t, servers, redistest.ACLRule(user, password, "tenure:"))
}

// aclSetRule runs the ACL SETUSER line rule on every server.
func aclSetRule(t *testing.T, servers []*redistest.Server, rule string) {
	t.Helper()
	for _, s := range servers {
		c := s.NewClient()
		var args []any
		for _, f := range strings.Fields(rule) {
			args = append(args, f)
		}
		err := c.Do(context.Background(), args...).Err()
		c.Close()
		if err != nil {
			t.Fatalf("%s: %v", s.Addr(), err)
		}
	}
}

func TestSentinelCLI(t *testing.T) {
	g := redistest.NewSentinel(t, 1, 3)
	url := "redis-sentinel://" + strings.Join(g.SentinelAddrs(), ",") + "/" + g.MasterName()
	t.Run("default user", func(t *testing.T) {
		deployRound(t, []string{"--redis", url}, nil, "sen", false)
	})
	t.Run("ACL user", func(t *testing.T) {
		const user, pw = "tenure-sen", "sentinel-pw-1234"
		aclSetUser(t, g.Servers(), user, pw)
		aclURL := strings.Replace(url, "://", "://"+user+"@", 1)
		stderr := deployRound(t, nil, []string{"REDIS_URL=" + aclURL, "TENURE_REDIS_PASSWORD=" + pw}, "sen-acl", false)
		if strings.Contains(stderr, "NOPERM") || strings.Contains(stderr, pw) {
			t.Errorf("stderr:\n%s", stderr)
		}
		// A wrong password is a refusal, and never shown.
		code, _, stderr := result(t, on([]string{"REDIS_URL=" + strings.Replace(url, "://", "://"+user+":wrong-pw-5678@", 1)}, "status", "x"))
		if code != exitRefused || strings.Contains(stderr, "wrong-pw-5678") {
			t.Errorf("a wrong password: status %d: %s", code, stderr)
		}
	})
	t.Run("wrong URLs", func(t *testing.T) {
		sentinel := g.SentinelAddrs()[0]
		for _, tc := range []struct {
			what, url string
			code      int
			msgs      []string
		}{
			// It failed on EVALSHA, quoting the script's arguments, a
			// token among them.
			{"a plain URL at a sentinel", "redis://" + sentinel, exitUsage,
				[]string{sentinel + " is a sentinel", "use redis-sentinel://" + sentinel + "/MASTER", fmt.Sprintf("%q", g.MasterName())}},
			// It said "all sentinels specified in configuration are
			// unreachable: redis: nil" while they answered.
			{"a master they do not monitor", "redis-sentinel://" + sentinel + "/no-such-master", exitUsage,
				[]string{`monitor no master named "no-such-master"`, fmt.Sprintf("they monitor %q", g.MasterName())}},
			// It said "context deadline exceeded", after 5 seconds.
			{"sentinels down", "redis-sentinel://127.0.0.1:1,127.0.0.1:2/" + g.MasterName(), exitRedis,
				[]string{"no sentinel answered: 127.0.0.1:1: ", "connection refused"}},
			{"a sentinel URL at a server", "redis-sentinel://" + srv.Addr() + "/" + g.MasterName(), exitUsage,
				[]string{srv.Addr() + " is a Redis server, not a sentinel: use redis://" + srv.Addr()}},
		} {
			t.Run(tc.what, func(t *testing.T) {
				code, _, stderr := result(t, on(nil, "--redis", tc.url, "run", "wrong-kind", "--", "true"))
				if code != tc.code {
					t.Errorf("status %d, want %d: %s", code, tc.code, stderr)
				}
				for _, m := range tc.msgs {
					if !strings.Contains(stderr, m) {
						t.Errorf("stderr does not say %q: %s", m, stderr)
					}
				}
				if strings.Contains(stderr, "retired") || strings.Contains(stderr, "deadline exceeded") {
					t.Errorf("stderr: %s", stderr)
				}
			})
		}
	})
	t.Run("failover while waiting", func(t *testing.T) {
		c := g.FailoverClient(t)
		m, err := lease.New(c, lease.WithLogger(quietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		l, err := m.TryAcquire(context.Background(), "sen-failover", lease.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		ran := filepath.Join(t.TempDir(), "ran")
		waiter := on(nil, "--redis", url, "-v", "run", "--wait", "2m", "sen-failover", "--", "sh", "-c", `echo ran >> "$1"`, "sh", ran)
		var stderr bytes.Buffer
		waiter.Stderr = &stderr
		startBackground(t, waiter)
		if err := g.Failover(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatal("the waiter ran while the name was held")
		}
		// The lease may or may not have reached the new primary before
		// the failover; either way, once it is released the waiter runs.
		_ = l.Release(context.Background())
		if code := exitOf(t, waiter, 2*time.Minute); code != 0 {
			t.Fatalf("the waiter exited %d: %s", code, stderr.String())
		}
		waitFile(t, ran, 1, time.Second)
	})
}

// TestSentinelTLSCLI: a rediss-sentinel:// URL against a Sentinel group
// whose sentinels and data servers are TLS-only and ask for client
// certificates (replication and the sentinels' links over TLS too), as an
// ACL user, with the TLS files from the environment.
func TestSentinelTLSCLI(t *testing.T) {
	g := redistest.NewSentinelConfig(t, redistest.Config{TLS: &redistest.TLS{AuthClients: "yes"}}, 1, 3)
	const user, pw = "tenure-sen-tls", "sentinel-tls-pw-1234"
	aclSetUser(t, g.Servers(), user, pw)
	s := g.Servers()[0]
	hosts := strings.Join(g.SentinelAddrs(), ",") + "/" + g.MasterName()
	env := []string{"REDIS_URL=rediss-sentinel://" + user + "@" + hosts, "TENURE_REDIS_PASSWORD=" + pw,
		"TENURE_TLS_CA=" + s.TLSFile("ca.crt"), "TENURE_TLS_CERT=" + s.TLSFile("client.crt"), "TENURE_TLS_KEY=" + s.TLSFile("client.key")}
	stderr := deployRound(t, nil, env, "sen-tls", false)
	if strings.Contains(stderr, "NOPERM") || strings.Contains(stderr, pw) {
		t.Errorf("stderr:\n%s", stderr)
	}
	for _, s := range g.Servers() {
		if log := s.ACLLog(t); len(log) > 0 {
			t.Errorf("%s: the ACL LOG has refusals:\n%s", s.Addr(), strings.Join(log, "\n"))
		}
	}
	// Without the client certificate the sentinels refuse the handshake.
	code, _, stderr := result(t, on(env[:3], "status", "x"))
	if code != exitRefused || strings.Contains(stderr, pw) {
		t.Errorf("no client certificate: status %d: %s", code, stderr)
	}
	// The plain form reaches no sentinel, and the error does not quote
	// the password given in the URL.
	code, _, stderr = result(t, on(nil, "--redis", "redis-sentinel://"+user+":"+pw+"@"+hosts, "status", "x"))
	if code != exitRedis || !strings.Contains(stderr, "Sentinel master") || strings.Contains(stderr, pw) || !strings.Contains(stderr, "use a rediss URL") {
		t.Errorf("redis-sentinel:// against TLS-only sentinels: status %d, want %d: %s", code, exitRedis, stderr)
	}
}

func TestClusterCLI(t *testing.T) {
	cl := redistest.NewCluster(t, 3, 0)
	url := "redis-cluster://" + strings.Join(cl.Addrs()[:2], ",")
	t.Run("default user", func(t *testing.T) {
		deployRound(t, []string{"--redis", url}, nil, "clu", false)
	})
	t.Run("list scans every primary", func(t *testing.T) {
		c := cl.Client(t)
		m, err := lease.New(c, lease.WithLogger(quietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		owners := map[string]bool{}
		var names []string
		for i := 0; i < 12; i++ {
			name := fmt.Sprintf("clu-many-%02d", i)
			if _, err := m.TryAcquire(context.Background(), name); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
			slot := redisSlotOwner(t, c, "tenure:{"+name+"}")
			owners[slot] = true
		}
		if len(owners) < 2 {
			t.Fatalf("the names all live on one primary: %v", owners)
		}
		code, out, stderr := result(t, on(nil, "--redis", url, "list", "clu-many-*"))
		if code != 0 {
			t.Fatalf("list: %d %s", code, stderr)
		}
		for _, n := range names {
			if !strings.Contains(out, n) {
				t.Errorf("list misses %s:\n%s", n, out)
			}
		}
	})
	// A plain URL at one node worked for the names whose slots it
	// serves, and failed with MOVED (exit 69) for the others.
	t.Run("a plain URL at a node", func(t *testing.T) {
		node := cl.Addrs()[0]
		for i := range 6 {
			code, _, stderr := result(t, on(nil, "--redis", "redis://"+node, "run", fmt.Sprintf("clu-plain-%d", i), "--", "true"))
			want := node + " is a Cluster node: use redis-cluster://" + node
			if code != exitUsage || !strings.Contains(stderr, want) || strings.Contains(stderr, "MOVED") {
				t.Errorf("name %d: status %d, want %d with %q: %s", i, code, exitUsage, want, stderr)
			}
		}
	})
	t.Run("a Cluster URL at a server", func(t *testing.T) {
		code, _, stderr := result(t, on(nil, "--redis", "redis-cluster://"+srv.Addr(), "status", "x"))
		want := srv.Addr() + " is a single Redis server, not a Cluster node: use redis://" + srv.Addr()
		if code != exitUsage || !strings.Contains(stderr, want) {
			t.Errorf("status %d, want %d with %q: %s", code, exitUsage, want, stderr)
		}
	})
	t.Run("ACL user", func(t *testing.T) {
		const user, pw = "tenure-clu", "cluster-pw-1234"
		// docs/security.md's Cluster line, word for word: a Cluster
		// client also reads the slot map and the command table. The
		// single-server line was refused CLUSTER SLOTS.
		aclSetRule(t, cl.Nodes(), redistest.ACLClusterRule(user, pw, "tenure:"))
		file := filepath.Join(t.TempDir(), "pw")
		if err := os.WriteFile(file, []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		aclURL := strings.Replace(url, "://", "://"+user+"@", 1)
		stderr := deployRound(t, []string{"--redis", aclURL, "--redis-password-file", file}, nil, "clu-acl", false)
		if strings.Contains(stderr, "NOPERM") {
			t.Errorf("stderr:\n%s", stderr)
		}
		for _, n := range cl.Nodes() {
			if log := n.ACLLog(t); len(log) > 0 {
				t.Errorf("%s: the ACL LOG has refusals:\n%s", n.Addr(), strings.Join(log, "\n"))
			}
		}
		// The single-server line is not enough, as docs/security.md says.
		const single = "tenure-clu-single"
		aclSetUser(t, cl.Nodes(), single, pw)
		code, _, stderr := result(t, on([]string{"TENURE_REDIS_PASSWORD=" + pw}, "--redis",
			strings.Replace(url, "://", "://"+single+"@", 1), "status", "x"))
		if code != exitRefused || !strings.Contains(stderr, "cluster|slots") {
			t.Errorf("the single-server line on a Cluster: status %d, want %d naming cluster|slots: %s", code, exitRefused, stderr)
		}
		for _, n := range cl.Nodes() {
			n.ResetACLLog(t)
		}
	})
}

// TestClusterTLSCLI: a rediss-cluster:// URL against a Cluster whose nodes
// are TLS-only (the bus and replication over TLS too) and ask for client
// certificates, as an ACL user, with the TLS files from the flags.
func TestClusterTLSCLI(t *testing.T) {
	cl := redistest.NewClusterConfig(t, redistest.Config{TLS: &redistest.TLS{AuthClients: "yes"}}, 3, 0)
	const user, pw = "tenure-clu-tls", "cluster-tls-pw-1234"
	aclSetRule(t, cl.Nodes(), redistest.ACLClusterRule(user, pw, "tenure:"))
	n := cl.Nodes()[0]
	hosts := strings.Join(cl.Addrs()[:2], ",")
	tlsArgs := []string{"--tls-ca", n.TLSFile("ca.crt"), "--tls-cert", n.TLSFile("client.crt"), "--tls-key", n.TLSFile("client.key")}
	args := append([]string{"--redis", "rediss-cluster://" + user + "@" + hosts}, tlsArgs...)
	stderr := deployRound(t, args, []string{"TENURE_REDIS_PASSWORD=" + pw}, "clu-tls", false)
	if strings.Contains(stderr, "NOPERM") || strings.Contains(stderr, pw) {
		t.Errorf("stderr:\n%s", stderr)
	}
	for _, n := range cl.Nodes() {
		if log := n.ACLLog(t); len(log) > 0 {
			t.Errorf("%s: the ACL LOG has refusals:\n%s", n.Addr(), strings.Join(log, "\n"))
		}
	}

	// Without the client certificate the nodes refuse the handshake.
	code, _, stderr := result(t, on([]string{"TENURE_REDIS_PASSWORD=" + pw},
		"--redis", "rediss-cluster://"+user+"@"+hosts, "--tls-ca", n.TLSFile("ca.crt"), "status", "x"))
	if code != exitRefused || strings.Contains(stderr, pw) {
		t.Errorf("no client certificate: status %d: %s", code, stderr)
	}
	// The plain form reaches no node of a TLS-only cluster, and the error
	// does not quote the password given in the URL.
	code, _, stderr = result(t, on(nil, "--redis", "redis-cluster://"+user+":"+pw+"@"+hosts, "status", "x"))
	if code != exitRedis || !strings.Contains(stderr, "Redis Cluster") || strings.Contains(stderr, pw) || !strings.Contains(stderr, "use a rediss URL") {
		t.Errorf("redis-cluster:// against TLS-only nodes: status %d, want %d: %s", code, exitRedis, stderr)
	}
}

// redisSlotOwner is the address of the primary that owns key's slot.
func redisSlotOwner(t *testing.T, c *redis.ClusterClient, key string) string {
	t.Helper()
	owner := ""
	err := c.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		if n, err := m.Exists(ctx, key).Result(); err == nil && n == 1 {
			owner = m.Options().Addr
		}
		return nil
	})
	if err != nil || owner == "" {
		t.Fatalf("no primary holds %s: %v", key, err)
	}
	return owner
}

func TestQuorumCLI(t *testing.T) {
	var servers []*redistest.Server
	var args []string
	for range 3 {
		s := redistest.Start(t)
		servers = append(servers, s)
		args = append(args, "--redis", s.URL())
	}
	deployRound(t, args, nil, "quo", true)

	// The lease is on every node, under one token.
	code, _, stderr := result(t, on(nil, append(append([]string(nil), args...), "run", "quo-each", "--", "sh", "-c",
		`exit 0`)...))
	if code != 0 {
		t.Fatalf("run: %d %s", code, stderr)
	}
	for _, s := range servers {
		if n := s.Client(t).Exists(context.Background(), "tenure:{quo-each}:fence").Val(); n != 1 {
			t.Errorf("%s has no fence counter of quo-each", s.Addr())
		}
	}

	// A minority down: tenure goes on, and says so.
	if err := servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = result(t, on(nil, append(append([]string(nil), args...), "run", "quo-minority", "--", "true")...))
	if code != 0 || !strings.Contains(stderr, "going on with the 2 of 3 nodes that answered") {
		t.Errorf("run with a node down: %d %s", code, stderr)
	}
	code, out, stderr := result(t, on(nil, append(append([]string(nil), args...), "status", "quo-minority")...))
	if code != 0 || !strings.Contains(out, "no answer") {
		t.Errorf("status with a node down: %d %s %s", code, out, stderr)
	}
	// A majority down: Redis is unreachable.
	if err := servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = result(t, on(nil, append(append([]string(nil), args...), "status", "quo-minority")...))
	if code != exitRedis || !strings.Contains(stderr, "1 of 3 nodes answered, a majority is 2") {
		t.Errorf("status with two nodes down: %d %s", code, stderr)
	}
}

// TestQuorumTLSACL: quorum mode over three TLS servers with client
// certificates, as an ACL user whose password comes from the environment
// (TestSentinelTLSCLI and TestClusterTLSCLI do the same for the other forms).
func TestQuorumTLSACL(t *testing.T) {
	certs := redistest.MustCerts(t)
	const user, pw = "tenure-quo", "quorum-pw-1234"
	var servers []*redistest.Server
	var args []string
	for range 3 {
		s := redistest.Start(t, redistest.Config{TLS: &redistest.TLS{Certs: certs, AuthClients: "yes"}})
		servers = append(servers, s)
		args = append(args, "--redis", userURL(s, user))
	}
	aclSetUser(t, servers, user, pw)
	s := servers[0]
	env := []string{"TENURE_REDIS_PASSWORD=" + pw, "TENURE_TLS_CA=" + s.TLSFile("ca.crt"),
		"TENURE_TLS_CERT=" + s.TLSFile("client.crt"), "TENURE_TLS_KEY=" + s.TLSFile("client.key")}
	stderr := deployRound(t, args, env, "quo-tls", true)
	if strings.Contains(stderr, "NOPERM") || strings.Contains(stderr, pw) {
		t.Errorf("stderr:\n%s", stderr)
	}
	for _, s := range servers {
		if log := s.ACLLog(t); len(log) > 0 {
			t.Errorf("%s: the ACL LOG has refusals:\n%s", s.Addr(), strings.Join(log, "\n"))
		}
	}
}

// TestQuorumElect: in quorum mode elect leads by the lease alone: one
// leader at a time (the second candidate's command starts only after the
// first's ended), the leader's identity as the holder status shows, its
// term in TENURE_FENCE, and a lost lease stops the command with the lost
// status.
func TestQuorumElect(t *testing.T) {
	var servers []*redistest.Server
	var args []string
	for range 3 {
		s := redistest.Start(t)
		servers = append(servers, s)
		args = append(args, "--redis", s.URL())
	}
	with := func(more ...string) []string { return append(append([]string(nil), args...), more...) }
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	step := func(id string) string {
		return fmt.Sprintf(`echo start %s $TENURE_FENCE >> %s; sleep 1; echo end %s >> %s`, id, log, id, log)
	}
	a := on(nil, with("elect", "--ttl", "2s", "--identity", "cand-a", "quo-lead", "--", "sh", "-c", step("a"))...)
	b := on(nil, with("elect", "--ttl", "2s", "--identity", "cand-b", "quo-lead", "--", "sh", "-c", step("b"))...)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, log, 1, 30*time.Second)
	code, out, stderr := result(t, on(nil, with("status", "quo-lead")...))
	if code != 0 || !strings.Contains(out, "cand-a") {
		t.Errorf("status while cand-a leads: %d %s %s", code, out, stderr)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, a, 30*time.Second); code != 0 {
		t.Fatalf("cand-a: exit %d", code)
	}
	if code := exitOf(t, b, 30*time.Second); code != 0 {
		t.Fatalf("cand-b: exit %d", code)
	}
	lines := waitFile(t, log, 4, 10*time.Second)
	if !strings.HasPrefix(lines[0], "start a ") || lines[1] != "end a" || !strings.HasPrefix(lines[2], "start b ") || lines[3] != "end b" {
		t.Fatalf("terms overlap or are out of order: %q", lines)
	}
	fa, _ := strconv.ParseInt(strings.Fields(lines[0])[2], 10, 64)
	fb, _ := strconv.ParseInt(strings.Fields(lines[2])[2], 10, 64)
	if fa <= 0 || fb <= fa {
		t.Errorf("terms %d then %d: want increasing fences", fa, fb)
	}

	// The lease deleted on a majority of nodes: the command is stopped.
	c := on(nil, with("elect", "--ttl", "1s", "--identity", "cand-c", "quo-lost", "--", "sleep", "60")...)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); servers[0].Client(t).Exists(context.Background(), "tenure:{quo-lost}").Val() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("cand-c never took quo-lost")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, s := range servers[:2] {
		s.Client(t).Del(context.Background(), "tenure:{quo-lost}")
	}
	if code := exitOf(t, c, 30*time.Second); code != exitLost {
		t.Fatalf("cand-c after its lease was deleted on a majority: exit %d, want %d", code, exitLost)
	}
}

// A watch or an observer that cannot connect fails with the connection's
// status; it exited 0 when the failed connect's context was read after
// being stopped.
func TestWatchConnectFailure(t *testing.T) {
	for _, args := range [][]string{
		{"--redis", "127.0.0.1:1", "status", "--watch", "x"},
		{"--redis", "127.0.0.1:1", "elect", "--observe", "x"},
	} {
		if code, _, stderr := result(t, on(nil, args...)); code != exitRedis {
			t.Errorf("%v: exit %d, want %d: %s", args, code, exitRedis, stderr)
		}
	}
}
