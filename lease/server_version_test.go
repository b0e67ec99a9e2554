package lease_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// TestServerVersionSupported holds the README's oldest supported server to
// account on whichever server the tests run on (REDIS_SERVER): from Redis
// 6.2 on (Valkey reports the Redis version it is compatible with), a lease
// is acquired, renewed by Extend and released; on an older server the
// first acquire fails with an error that names 6.2, and takes nothing.
// .ci/run runs it on Debian 11's Redis 6.0 for the second half.
func TestServerVersionSupported(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := raw.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	major, minor := redisVersion(t, info)
	m := newManager(t, srv.Client(t), lease.WithTTL(5*time.Second))
	l, err := m.TryAcquire(ctx, "versioned")
	if major < 6 || major == 6 && minor < 2 {
		if err == nil || !strings.Contains(err.Error(), "Redis 6.2 or later") {
			t.Fatalf("TryAcquire on Redis %d.%d: %v, want an error naming 6.2", major, minor, err)
		}
		if n := raw.Exists(ctx, "tenure:{versioned}").Val(); n != 0 {
			t.Fatalf("the refused acquire left the lease key behind on Redis %d.%d", major, minor)
		}
		t.Logf("Redis %d.%d refused as too old: %v", major, minor, err)
		return
	}
	if err != nil {
		t.Fatalf("TryAcquire on Redis %d.%d: %v", major, minor, err)
	}
	if err := l.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("Extend on Redis %d.%d: %v", major, minor, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release on Redis %d.%d: %v", major, minor, err)
	}
}

// redisVersion reads redis_version from INFO server.
func redisVersion(t *testing.T, info string) (major, minor int) {
	t.Helper()
	for _, line := range strings.Split(info, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:")
		if !ok {
			continue
		}
		parts := strings.SplitN(v, ".", 3)
		if len(parts) < 2 {
			break
		}
		a, err1 := strconv.Atoi(parts[0])
		b, err2 := strconv.Atoi(parts[1])
		if err1 == nil && err2 == nil {
			return a, b
		}
	}
	t.Fatalf("no redis_version in INFO server:\n%s", info)
	return 0, 0
}
