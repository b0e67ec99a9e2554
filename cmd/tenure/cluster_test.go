package main

// Every command against a Cluster: plain, as an ACL user, over TLS, list
// over every primary, and URLs of the wrong kind.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

func TestClusterCLI(t *testing.T) {
	cl := redistest.NewCluster(t, 3, 0)
	url := "redis-cluster://" + strings.Join(cl.Addrs()[:2], ",")
	t.Run("default user", func(t *testing.T) {
		deployRound(t, []string{"--redis", url}, nil, "clu", false)
	})
	t.Run("list scans every primary", func(t *testing.T) { clusterListScansEveryPrimary(t, cl, url) })
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
	t.Run("ACL user", func(t *testing.T) { clusterACLUser(t, cl, url) })
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

// clusterListScansEveryPrimary: list, over the Cluster cl (at url), finds
// names held on every primary.
func clusterListScansEveryPrimary(t *testing.T, cl *redistest.Cluster, url string) {
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
}

// clusterACLUser: every command as the user of docs/security.md's Cluster
// line, over cl (at url), with no refusal; the single-server line is not
// enough.
func clusterACLUser(t *testing.T, cl *redistest.Cluster, url string) {
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
}
