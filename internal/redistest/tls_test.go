package redistest_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/redistest"
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
