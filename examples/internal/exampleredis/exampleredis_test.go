package exampleredis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/tests/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// connect is Connect for a test; it returns what Connect said too.
func connect(t *testing.T) (*Redis, string) {
	t.Helper()
	var said strings.Builder
	r, err := Connect(t.Context(), func(format string, args ...any) {
		fmt.Fprintf(&said, format, args...)
	})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	return r, said.String()
}

// TestEmbedded: without REDIS_URL, an embedded server whose keys expire in
// real time; Cleanup leaves it alone, and Close closes the clients.
func TestEmbedded(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	r, said := connect(t)
	if !strings.Contains(said, "REDIS_URL is not set; started an embedded Redis (miniredis) at 127.0.0.1:") || r.Suffix != "" {
		t.Fatalf("said %q, suffix %q", said, r.Suffix)
	}
	ctx := t.Context()
	c := r.NewClient()
	if err := c.Set(ctx, "kept", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "short", "v", 50*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	r.Cleanup(ctx, "kept")
	deadline := time.Now().Add(10 * time.Second) // generous: the server's clock follows ours
	for c.Exists(ctx, "short").Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a key with a TTL never expired")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := c.Exists(ctx, "kept").Val(); n != 1 {
		t.Errorf("Cleanup deleted a key of the embedded server")
	}
	r.Close()
	if err := c.Ping(ctx).Err(); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("Ping after Close: %v, want redis.ErrClosed", err)
	}
}

// TestShared: with REDIS_URL, the named server and a suffix for names;
// Cleanup deletes just the keys it is given, and Close leaves the server
// running.
func TestShared(t *testing.T) {
	srv := redistest.Start(t)
	t.Setenv("REDIS_URL", srv.URL())
	r, said := connect(t)
	if want := fmt.Sprintf("redis: using REDIS_URL (%s)", srv.Addr()); said != want {
		t.Errorf("said %q, want %q", said, want)
	}
	if len(r.Suffix) != 9 || r.Suffix[0] != '-' {
		t.Errorf("suffix %q, want a dash and 8 characters", r.Suffix)
	}
	ctx := t.Context()
	c := r.NewClient()
	lease, other := Keys.Lease("job"+r.Suffix), Keys.Lease("other"+r.Suffix)
	if err := c.MSet(ctx, lease, "v", other, "v").Err(); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel() // Cleanup runs at a run's end, even an interrupted one
	r.Cleanup(cancelled, lease)
	r.Close()
	check := srv.Client(t)
	if n := check.Exists(ctx, lease).Val(); n != 0 {
		t.Errorf("Cleanup left %s", lease)
	}
	if n := check.Exists(ctx, other).Val(); n != 1 {
		t.Errorf("Cleanup deleted %s, which it was not given", other)
	}
}

// TestUnreachable: Start says which server did not answer.
func TestUnreachable(t *testing.T) {
	srv := redistest.Start(t)
	addr := srv.Addr()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Setenv("REDIS_URL", "redis://"+addr)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := Start(ctx); err == nil || !strings.Contains(err.Error(), "redis at "+addr) {
		t.Errorf("Start on a stopped server: %v", err)
	}
}
