package main

// Connecting: usage errors of the connection flags, the default address's
// hint, a watch that cannot connect (conn.go).

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

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
		// It said only "invalid URL scheme: htp".
		{"a misspelt scheme", nil, []string{"--redis", "htp://foo"}, "invalid URL scheme: htp; the schemes tenure takes: " + acceptedSchemes},
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

// TestRefusedAtOnce: a refused connection is said after one plain dial:
// the client's own dialer, which go-redis retries (DialerRetries: five
// more dials, 100ms apart), is not used at all. It was, and a Redis that
// was down took most of a second to say so.
func TestRefusedAtOnce(t *testing.T) {
	tg, err := parseTarget("redis://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int32
	tg.opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	c := tg.client()
	defer c.Close()
	err = tg.reach(context.Background(), c)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("reach: %v, want connection refused", err)
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("the client dialed %d times after the refusal", n)
	}
}

// TestNotARedisServer: a --redis address where something else listens is
// said so: an HTTP server is a usage error (2, as a URL of the wrong kind
// is), not Redis unreachable (69), which it was, quoting the HTML; a port
// that accepts and never answers is asked about after the 5s bound (69),
// where it said "context deadline exceeded".
func TestNotARedisServer(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "<!DOCTYPE HTML>\n<html></html>\n")
	}))
	defer web.Close()
	code, _, stderr := result(t, on(nil, "--redis", "redis://"+web.Listener.Addr().String(), "status", "x"))
	if code != exitUsage || !strings.Contains(stderr, "is not a Redis server (it answered HTTP)") {
		t.Errorf("an HTTP server: status %d, want %d: %s", code, exitUsage, stderr)
	}

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	code, _, stderr = result(t, on(nil, "--redis", "redis://"+silent.Addr().String(), "status", "x"))
	if code != exitRedis || !strings.Contains(stderr, "no reply in 5s: is this a Redis server?") {
		t.Errorf("a silent server: status %d, want %d: %s", code, exitRedis, stderr)
	}
}

// TestClusterSeedsRefuse: a Cluster whose seeds all refuse the connection
// is said at once, each seed's refusal named, with one dial each (the
// Cluster client's dial retries took most of a second); exit 69.
func TestClusterSeedsRefuse(t *testing.T) {
	code, _, stderr := result(t, on(nil, "--redis", "redis-cluster://127.0.0.1:1,127.0.0.1:2", "status", "x"))
	if code != exitRedis || !strings.Contains(stderr, "every seed refused the connection: ") ||
		!strings.Contains(stderr, "127.0.0.1:1: connect: connection refused") || !strings.Contains(stderr, "127.0.0.1:2: connect: connection refused") {
		t.Errorf("status %d, want %d naming both refusals: %s", code, exitRedis, stderr)
	}
}
