package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// Against a server that listens only on TLS: every lease feature,
// waiting included (the manager's pub/sub connection is dialled with the
// same options; the server has no plain port), as a least-privilege user,
// with server verification alone and with mutual TLS; without a client
// certificate a server that requires one refuses.
func TestTLS(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name     string
		auth     string
		withCert bool
	}{{"server verification", "no", false}, {"mutual", "yes", true}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t, redistest.Config{TLS: &redistest.TLS{AuthClients: mode.auth}})
			admin := s.Client(t)
			u := s.CreateUser(t, "tenure", lease.DefaultKeyPrefix)
			o := s.UserOptions(u)
			o.TLSConfig = s.Certs().ClientConfig(mode.withCert)
			c := redis.NewClient(o)
			defer c.Close()
			mon := s.Monitor(t)
			leaseWorkload(t, c, admin)
			s.CheckUserRun(t, mon, lease.DefaultKeyPrefix)
		})
	}
	t.Run("no client certificate", func(t *testing.T) {
		t.Parallel()
		s := redistest.Start(t, redistest.Config{TLS: &redistest.TLS{AuthClients: "yes"}})
		o := s.Options()
		o.TLSConfig = s.Certs().ClientConfig(false)
		o.MaxRetries = -1
		c := redis.NewClient(o)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := newManager(t, c).TryAcquire(ctx, "tls"); err == nil {
			t.Fatal("a client without a certificate acquired a lease from a server that requires one")
		}
	})
}
