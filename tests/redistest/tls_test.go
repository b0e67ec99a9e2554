package redistest_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/tests/redistest"
)

// A TLS server has no plain port, verifies its clients as asked, and the
// harness's Pause, Kill and Restart work on it as on a plain server.
func TestTLSServer(t *testing.T) {
	t.Parallel()
	for _, auth := range []string{"yes", "optional", "no"} {
		t.Run(auth, func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t, redistest.Config{TLS: &redistest.TLS{AuthClients: auth}})
			if !strings.HasPrefix(s.URL(), "rediss://") {
				t.Fatalf("URL %q", s.URL())
			}
			ctx := ctxTimeout(t, 30*time.Second)
			c := s.Client(t) // TLS with the client certificate
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}

			// Plain TCP on the TLS port is not Redis: the server waits
			// for a handshake, and drops the connection.
			plain := redis.NewClient(&redis.Options{Addr: s.Addr(), DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
			defer plain.Close()
			if err := plain.Ping(ctx).Err(); err == nil {
				t.Fatal("a plain client was answered on the TLS port")
			}

			// Without a client certificate: refused only when required.
			o := s.Options()
			o.TLSConfig = s.Certs().ClientConfig(false)
			o.MaxRetries = -1
			anon := redis.NewClient(o)
			defer anon.Close()
			err := anon.Ping(ctx).Err()
			if auth == "yes" && err == nil {
				t.Fatal("tls-auth-clients yes answered a client without a certificate")
			}
			if auth != "yes" && err != nil {
				t.Fatalf("tls-auth-clients %s refused a client without a certificate: %v", auth, err)
			}

			// A client that trusts another authority refuses the server.
			o = s.Options()
			o.TLSConfig = redistest.MustCerts(t).ClientConfig(true)
			o.MaxRetries = -1
			stranger := redis.NewClient(o)
			defer stranger.Close()
			var unknown *tls.CertificateVerificationError
			if err := stranger.Ping(ctx).Err(); !errors.As(err, &unknown) {
				t.Fatalf("a client trusting another CA: %v, want an unknown authority error", err)
			}

			s.MustPause(t)
			pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			if err := c.Ping(pctx).Err(); err == nil {
				t.Error("a paused TLS server answered")
			}
			cancel()
			s.MustResume(t)
			s.MustRestart(t) // no AOF: comes back empty, on the same port
			if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
				t.Fatalf("after Restart: EXISTS = %d, %v", n, err)
			}
			s.MustKill(t)
			if s.Running() {
				t.Fatal("running after Kill")
			}
		})
	}
}

// The certificate files a TLS server writes work for a client reading
// them as tenure's CLI will.
func TestTLSFiles(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.Config{TLS: &redistest.TLS{}})
	cert, err := tls.LoadX509KeyPair(s.TLSFile("client.crt"), s.TLSFile("client.key"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", s.Addr(),
		&tls.Config{RootCAs: s.Certs().ClientConfig(false).RootCAs, Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if p := (&redistest.Server{}).TLSFile("ca.crt"); p != "" {
		t.Fatalf("a plain server has a CA file: %q", p)
	}
}

func TestTLSConfigErrors(t *testing.T) {
	t.Parallel()
	if _, err := redistest.StartServer(redistest.Config{TLS: &redistest.TLS{AuthClients: "maybe"}}); err == nil {
		t.Fatal("AuthClients maybe accepted")
	}
}

// A TLS Cluster forms over TLS only (the nodes have no plain port, so the
// MEET, the gossip on the bus and the replicas' links all ran over TLS),
// and its ClusterOptions reach every primary.
func TestTLSCluster(t *testing.T) {
	t.Parallel()
	c := redistest.NewClusterConfig(t, redistest.Config{TLS: &redistest.TLS{}}, 2, 1)
	ctx := ctxTimeout(t, 30*time.Second)
	certs := c.Certs()
	if certs == nil || c.ClusterOptions().TLSConfig == nil {
		t.Fatal("a TLS cluster without certificates or TLS options")
	}
	for _, n := range c.Nodes() {
		if n.Certs() != certs || !strings.HasPrefix(n.URL(), "rediss://") {
			t.Fatalf("%s: not a TLS node of the cluster's authority", n.Addr())
		}
	}
	cc := c.Client(t)
	for i := range 50 {
		if err := cc.Set(ctx, fmt.Sprintf("key-%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var primaries atomic.Int32
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		primaries.Add(1)
		n, err := m.DBSize(ctx).Result()
		if err == nil && n == 0 {
			err = fmt.Errorf("%s has no keys", m.Options().Addr)
		}
		return err
	})
	if err != nil || primaries.Load() != 2 {
		t.Fatalf("%d primaries: %v", primaries.Load(), err)
	}
	// The slot map names the TLS ports, the only ones there are. CLUSTER
	// SLOTS, deprecated for CLUSTER SHARDS, is what go-redis reads its
	// slot map from, and so what must name them.
	//lint:ignore SA1019 the client's own source of its slot map
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	addrs := strings.Join(c.Addrs(), " ")
	for _, sl := range slots {
		for _, n := range sl.Nodes {
			if !strings.Contains(addrs, n.Addr) {
				t.Errorf("CLUSTER SLOTS names %s, not a node's TLS address (%s)", n.Addr, addrs)
			}
		}
	}
	// A plain cluster client gets no answer.
	o := c.ClusterOptions()
	o.TLSConfig = nil
	o.MaxRetries = -1
	o.ReadTimeout = time.Second
	plain := redis.NewClusterClient(o)
	defer plain.Close()
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Fatal("a plain cluster client was answered")
	}
}

// A TLS Sentinel group: sentinels and data servers TLS-only; the failover
// client follows a failover.
func TestTLSSentinel(t *testing.T) {
	t.Parallel()
	g := redistest.NewSentinelConfig(t, redistest.Config{TLS: &redistest.TLS{}}, 1, 3)
	ctx := ctxTimeout(t, 60*time.Second)
	if g.Certs() == nil || g.FailoverOptions().TLSConfig == nil {
		t.Fatal("a TLS group without certificates or TLS options")
	}
	for _, s := range append(g.Servers(), g.Sentinels()...) {
		if s.Certs() != g.Certs() || !strings.HasPrefix(s.URL(), "rediss://") {
			t.Fatalf("%s: not a TLS process of the group's authority", s.Addr())
		}
	}
	fc := g.FailoverClient(t)
	if err := fc.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	old := g.Primary()
	if n, err := old.Client(t).Wait(ctx, 1, 5000).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT = %d, %v", n, err)
	}
	if err := g.Failover(); err != nil {
		t.Fatal(err)
	}
	np := g.Primary()
	if np == old {
		t.Fatal("the same primary after a failover")
	}
	if v, err := np.Client(t).Get(ctx, "k").Result(); err != nil || v != "before" {
		t.Fatalf("GET k on the new primary = %q, %v", v, err)
	}
	eventually(t, 20*time.Second, func() error {
		return fc.Set(ctxTimeout(t, time.Second), "k", "after", 0).Err()
	})
}
