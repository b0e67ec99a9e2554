package main

// Every command against a Sentinel group: plain, as an ACL user, over TLS,
// through a failover, and URLs of the wrong kind.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

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
	t.Run("wrong URLs", func(t *testing.T) { sentinelWrongURLs(t, g) })
	t.Run("failover while waiting", func(t *testing.T) { sentinelFailoverWhileWaiting(t, g, url) })
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

// sentinelWrongURLs: URLs of the wrong kind for the Sentinel group g, or
// naming what g lacks, are said at once, with the URL to use.
func sentinelWrongURLs(t *testing.T, g *redistest.Sentinel) {
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
		// It said only "the path must be the master name".
		{"no master name", "redis-sentinel://" + sentinel, exitUsage,
			[]string{"has no master name", fmt.Sprintf("the sentinels monitor %q", g.MasterName())}},
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
}

// sentinelFailoverWhileWaiting: a run waiting for a name held on the
// Sentinel group g (at url) waits through a failover, and runs once the name
// is released.
func sentinelFailoverWhileWaiting(t *testing.T, g *redistest.Sentinel, url string) {
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
}
