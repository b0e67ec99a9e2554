package lease_test

import (
	"context"
	"crypto/fips140"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// fipsChild marks the test binary re-run under GODEBUG=fips140=only.
const fipsChild = "TENURE_TEST_FIPS140_CHILD"

// fipsDone is what the child prints when its lease cycle is done.
const fipsDone = "fips140=only: lease cycle done"

// A program in FIPS 140-only mode, where crypto/sha1 panics, runs a lease
// cycle: acquire, a renewal, SCRIPT FLUSH (what a restart loses), another
// renewal, release. The test binary runs itself again with
// GODEBUG=fips140=only, which must be set before the program starts:
// before the scripts took their SHA from the server, that run panicked in
// package initialisation ("crypto/sha1: use of SHA-1 is not allowed in
// FIPS 140-only mode").
func TestFIPS140OnlyLeaseCycle(t *testing.T) {
	if os.Getenv(fipsChild) != "" {
		fipsLeaseCycle(t)
		return
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFIPS140OnlyLeaseCycle$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "GODEBUG=fips140=only", fipsChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), fipsDone) {
		t.Fatalf("the test binary under GODEBUG=fips140=only: %v\n%s", err, out)
	}
	t.Logf("the child said:\n%s", out)
}

// fipsLeaseCycle is the child's part of TestFIPS140OnlyLeaseCycle.
func fipsLeaseCycle(t *testing.T) {
	if !fips140.Enforced() {
		t.Fatal("not in FIPS 140-only mode: GODEBUG did not reach the child")
	}
	srv := redistest.Start(t)
	raw := srv.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	m := newManager(t, srv.Client(t), lease.WithTTL(300*time.Millisecond))
	l, err := m.Acquire(ctx, "fips")
	if err != nil {
		t.Fatal(err)
	}
	renewed := func(what string) {
		t.Helper()
		d := l.Deadline()
		for l.Deadline().Equal(d) {
			select {
			case <-l.Done():
				t.Fatalf("lost before %s: %v", what, l.Err())
			case <-ctx.Done():
				t.Fatalf("no %s: %v", what, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	renewed("a renewal")
	if err := raw.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	renewed("a renewal after SCRIPT FLUSH")
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if raw.Exists(ctx, "tenure:{fips}").Val() != 0 {
		t.Fatal("the key is left after the release")
	}
	n := scriptCalls(t, raw)
	if n["script|load"] < 1 || n["evalsha"] < 3 {
		t.Fatalf("the server ran %v: want the SHA from SCRIPT LOAD, and EVALSHA", n)
	}
	t.Log(fipsDone, n)
}

// scriptCalls returns how many SCRIPT LOAD, EVALSHA and EVAL the server
// ran (INFO commandstats).
func scriptCalls(t *testing.T, c *redis.Client) map[string]int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		name = strings.TrimPrefix(name, "cmdstat_")
		if !ok || name != "script|load" && name != "evalsha" && name != "eval" {
			continue
		}
		out[name], _ = strconv.Atoi(stats[:strings.IndexByte(stats, ',')])
	}
	return out
}
