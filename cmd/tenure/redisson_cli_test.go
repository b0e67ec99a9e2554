package main

// Redisson mode as tenure mode (issue 48, section 3): --wait, -v, status
// and list of Redisson's objects, --fenced, --java-watchdog, the words of
// its refusals and losses, and run's help.

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/redisson"
	"github.com/tenure-go/tenure/tests/redistest"
)

// TestRunRedissonWaitsForRedis: with --wait given, a Redis that does not
// answer at the start is waited for as in a plain run (it exited 69 at
// once): one that comes back within --wait lets the command run; one
// that refuses, or a port that never answers, until --wait ends is 69,
// saying that --wait ran out.
func TestRunRedissonWaitsForRedis(t *testing.T) {
	s := redistest.Start(t)
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	env := []string{"REDIS_URL=" + s.URL()}
	code, _, stderr := result(t, on(env, "run", "--redisson", "--wait", "300ms", "rw-down", "--", "true"))
	if code != exitRedis || !strings.Contains(stderr, "waiting for it (--wait 300ms)") ||
		!strings.Contains(stderr, "still unreachable when --wait 300ms ran out") {
		t.Errorf("refused: status %d, want %d after --wait: %s", code, exitRedis, stderr)
	}
	p := redistest.StartProxy(t, s.Addr())
	p.BlackHole(true)
	code, _, stderr = result(t, on([]string{"REDIS_URL=redis://" + p.Addr()}, "run", "--redisson", "--wait", "300ms", "rw-down", "--", "true"))
	if code != exitRedis || !strings.Contains(stderr, "still unreachable when --wait 300ms ran out") {
		t.Errorf("a port that never answers: status %d, want %d after --wait: %s", code, exitRedis, stderr)
	}
	ran := filepath.Join(t.TempDir(), "ran")
	run := on(env, "run", "--redisson", "--wait", "2m", "rw-down", "--", "sh", "-c", `echo ran > "$0"`, ran)
	errOut := &syncBuffer{}
	run.Stderr = errOut
	startBackground(t, run)
	waitOutput(t, errOut, "waiting for it (--wait 2m0s)", 30*time.Second)
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, run, 2*time.Minute); code != 0 {
		t.Fatalf("after Redis came back: status %d: %s", code, errOut.String())
	}
	waitFile(t, ran, 1, time.Second)
}

// TestRunRedissonVerbose: -v logs the acquisition and the release, -vv
// the renewals too, and a wait says who holds the name, as in a plain
// run (Redisson mode printed nothing).
func TestRunRedissonVerbose(t *testing.T) {
	code, _, stderr := result(t, tenure("-v", "run", "--redisson", "rv-name", "--", "true"))
	for _, want := range []string{"msg=acquired name=rv-name", "redisson_field=", "msg=released name=rv-name"} {
		if code != 0 || !strings.Contains(stderr, want) {
			t.Errorf("-v: status %d, stderr lacks %q:\n%s", code, want, stderr)
		}
	}
	code, _, stderr = result(t, tenure("-vv", "run", "--redisson", "--ttl", "1s", "rv-name", "--", "sleep", "1.2"))
	if code != 0 || !strings.Contains(stderr, "level=DEBUG msg=renewed name=rv-name") {
		t.Errorf("-vv: status %d, no renewal logged:\n%s", code, stderr)
	}
	c := client(t)
	ctx := context.Background()
	c.HSet(ctx, "rv-held", "java-uuid:9", 1)
	c.PExpire(ctx, "rv-held", 500*time.Millisecond)
	code, _, stderr = result(t, tenure("run", "--redisson", "--wait", "1m", "rv-held", "--", "true"))
	if code != 0 || !strings.Contains(stderr, `Redisson lock "rv-held" is held by java-uuid:9 (1); waiting for it (--wait 1m0s)`) {
		t.Errorf("a wait: status %d, stderr %q", code, stderr)
	}
}

// TestStatusFindsRedissonLock: a plain "tenure status NAME" on a name a
// Redisson lock holds says so, by whom, and to add --redisson; --check
// calls it held (it said "free" and exited 1).
func TestStatusFindsRedissonLock(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	c.HSet(ctx, "rs-java", "6f1c-uuid:42", 2)
	c.PExpire(ctx, "rs-java", time.Minute)
	t.Cleanup(func() { c.Del(ctx, "rs-java") })
	code, out, _ := result(t, tenure("status", "rs-java"))
	if code != 0 || !strings.Contains(out, "is a Redisson lock (redisson-lock) held by 6f1c-uuid:42 (2)") ||
		!strings.Contains(out, "add --redisson") {
		t.Errorf("status: %d\n%s", code, out)
	}
	if code, _, _ := result(t, tenure("status", "--check", "rs-java")); code != 0 {
		t.Errorf("status --check of a name a Redisson lock holds: %d, want 0", code)
	}
	// A hash that is no Redisson lock leaves the name free.
	c.HSet(ctx, "rs-other", "name", "x")
	t.Cleanup(func() { c.Del(ctx, "rs-other") })
	if code, _, _ := result(t, tenure("status", "--check", "rs-other")); code != exitFree {
		t.Errorf("status --check of a name whose key is some other hash: %d, want %d", code, exitFree)
	}
}

// TestListRedisson: list --redisson lists the Redisson locks that match,
// with kind, owners and token, and neither tenure's leases nor other
// hashes.
func TestListRedisson(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	c.HSet(ctx, "rl-list-a", "uuid-a:1", 1)
	c.HSet(ctx, "rl-list-b", "mode", "write", "uuid-b:2:write", 1)
	c.Set(ctx, "redisson_lock_token:{rl-list-a}", 7, 0)
	c.HSet(ctx, "rl-list-other", "name", "x")
	t.Cleanup(func() { c.Del(ctx, "rl-list-a", "rl-list-b", "rl-list-other", "redisson_lock_token:{rl-list-a}") })
	code, out, errOut := result(t, tenure("list", "--redisson", "rl-list-*"))
	if code != 0 || !strings.Contains(out, "NAME") || strings.Contains(out, "rl-list-other") {
		t.Fatalf("list --redisson: %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"rl-list-a redisson-lock none 7 uuid-a:1 (1)", "rl-list-b redisson-write none 0 uuid-b:2:write (1)"} {
		if !strings.Contains(oneLine(out), want) {
			t.Errorf("list --redisson lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = result(t, tenure("list", "--redisson", "--json", "rl-list-a"))
	var got []redissonStatus
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got) != 1 || got[0].Token != 7 || got[0].Owners["uuid-a:1"] != 1 {
		t.Errorf("list --redisson --json: %d %v\n%s", code, err, out)
	}
}

// TestStatusRedissonSemaphore: status --redisson on an
// RPermitExpirableSemaphore shows its free permits and each permit's
// expiry (it showed "kind string", "token 0").
func TestStatusRedissonSemaphore(t *testing.T) {
	c := client(t)
	opts := srv.Options()
	opts.MaxRetries = -1 // a resent script would count twice
	rcl := redis.NewClient(opts)
	defer rcl.Close()
	rc, err := redisson.New(rcl)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx := context.Background()
	sem := rc.GetPermitExpirableSemaphore("rs-sem")
	t.Cleanup(func() { c.Del(ctx, sem.Key(), sem.TimeoutsKey()) })
	if _, err := sem.TrySetPermits(ctx, 3); err != nil {
		t.Fatal(err)
	}
	timed, err := sem.Acquire(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	forever, err := sem.Acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A permit whose taker's expiry has passed, not yet given back.
	c.ZAdd(ctx, sem.TimeoutsKey(), redis.Z{Score: float64(time.Now().Add(-time.Minute).UnixMilli()), Member: "lapsed"})
	code, out, errOut := result(t, tenure("status", "--redisson", "rs-sem"))
	for _, want := range []string{"redisson-semaphore", "1 free, 3 taken", timed.ID() + ": expires in 59m", forever.ID() + ": no expiry",
		"lapsed: expired 1m"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status --redisson of a semaphore: %d, lacks %q:\n%s%s", code, want, out, errOut)
		}
	}
	code, out, _ = result(t, tenure("status", "--redisson", "--json", "rs-sem"))
	var got struct {
		FreePermits int64 `json:"free_permits"`
		Permits     []struct {
			ID       string `json:"id"`
			NoExpiry bool   `json:"no_expiry"`
		} `json:"permits"`
	}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.FreePermits != 1 || len(got.Permits) != 3 {
		t.Errorf("status --redisson --json of a semaphore: %d %v\n%s", code, err, out)
	}
	for _, p := range []*redisson.Permit{timed, forever} {
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunRedissonFenced: --fenced takes the RFencedLock, and TENURE_FENCE
// is its token, which rises (it was always 0).
func TestRunRedissonFenced(t *testing.T) {
	c := client(t)
	t.Cleanup(func() { c.Del(context.Background(), "redisson_lock_token:{rf-fenced}") })
	var fences []int64
	for range 2 {
		code, out, stderr := result(t, tenure("run", "--redisson", "--fenced", "rf-fenced", "--", "sh", "-c", `echo "$TENURE_FENCE"`))
		f, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if code != 0 || err != nil || f <= 0 {
			t.Fatalf("status %d, TENURE_FENCE %q: %s", code, out, stderr)
		}
		fences = append(fences, f)
	}
	if fences[1] <= fences[0] {
		t.Errorf("tokens %v do not rise", fences)
	}
	if tok := c.Get(context.Background(), "redisson_lock_token:{rf-fenced}").Val(); tok != strconv.FormatInt(fences[1], 10) {
		t.Errorf("the token key holds %q, the last run got %d", tok, fences[1])
	}
	if code, _, stderr := result(t, tenure("run", "--fenced", "rf-fenced", "--", "true")); code != exitUsage || !strings.Contains(stderr, "--redisson") {
		t.Errorf("--fenced without --redisson: %d %q", code, stderr)
	}
}

// TestRunRedissonJavaWatchdog: --java-watchdog is Java's
// lockWatchdogTimeout; a --ttl above it is refused in words that name
// both flags and say nothing of readers (an RLock has none), and a larger
// --java-watchdog admits it.
func TestRunRedissonJavaWatchdog(t *testing.T) {
	code, _, stderr := result(t, tenure("run", "--redisson", "--ttl", "40s", "rj-name", "--", "true"))
	if code != exitUsage || !strings.Contains(stderr, "--ttl 40s exceeds --java-watchdog 30s") || strings.Contains(stderr, "reader") {
		t.Errorf("--ttl 40s: %d %q", code, stderr)
	}
	if code, _, stderr := result(t, tenure("run", "--redisson", "--java-watchdog", "1m", "--ttl", "40s", "rj-name", "--", "true")); code != 0 {
		t.Errorf("--java-watchdog 1m --ttl 40s: %d %q", code, stderr)
	}
}

// TestRunRedissonQuorumReason: --redisson with several --redis says why
// after its colon (nothing came after it).
func TestRunRedissonQuorumReason(t *testing.T) {
	code, _, stderr := result(t, tenure("--redis", srv.URL(), "--redis", "redis://127.0.0.1:1", "run", "--redisson", "rq", "--", "true"))
	if code != exitUsage || !strings.Contains(stderr, "(several --redis): a Redisson lock is one hash") {
		t.Errorf("%d %q", code, stderr)
	}
}

// TestRunRedissonNotALock: a name whose key holds a string is exit 2,
// saying that it is not a Redisson lock, without Redis's WRONGTYPE; a
// --wait does not retry it.
func TestRunRedissonNotALock(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	c.Set(ctx, "rn-string", "x", time.Minute)
	t.Cleanup(func() { c.Del(ctx, "rn-string") })
	for _, wait := range []string{"0", "1m"} {
		code, _, stderr := result(t, tenure("run", "--redisson", "--wait", wait, "rn-string", "--", "true"))
		if code != exitUsage || !strings.Contains(stderr, `"rn-string" is not a Redisson lock: its key holds a Redis string`) ||
			strings.Contains(stderr, "WRONGTYPE") {
			t.Errorf("--wait %s: %d %q", wait, code, stderr)
		}
	}
}

// TestRunRedissonLossSaidOnce: the loss of a Redisson lock is said once,
// in words (the library's chain named the lock three times and the
// watchdog twice).
func TestRunRedissonLossSaidOnce(t *testing.T) {
	c := client(t)
	file := filepath.Join(t.TempDir(), "started")
	run := tenure("-v", "run", "--redisson", "--ttl", "1s", "rl-lost-once", "--", "sh", "-c", `echo up > "$0"; sleep 30`, file)
	var errOut bytes.Buffer
	run.Stderr = &errOut
	startBackground(t, run)
	waitFile(t, file, 1, 20*time.Second)
	c.Del(context.Background(), "rl-lost-once")
	if code := exitOf(t, run, 20*time.Second); code != exitLost {
		t.Fatalf("exit %d, want %d", code, exitLost)
	}
	out := errOut.String()
	if !strings.Contains(out, "its owner field is gone from the hash") || strings.Contains(out, "watchdog:") ||
		!strings.Contains(out, "level=WARN msg=\"lock lost\" name=rl-lost-once") {
		t.Errorf("stderr:\n%s", out)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "tenure:") {
			continue // -v's records
		}
		if strings.Count(l, `"rl-lost-once"`) != 1 {
			t.Errorf("a line names the lock more than once: %s", l)
		}
	}
}

// TestRunHelpRedisson: run's help fits 80 columns (29 lines were wider),
// and shows --redisson with an example and TENURE_REDISSON_FIELD.
func TestRunHelpRedisson(t *testing.T) {
	code, out, _ := result(t, tenure("run", "--help"))
	if code != 0 {
		t.Fatal(code)
	}
	for i, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("line %d is %d columns wide: %q", i+1, n, l)
		}
	}
	for _, want := range []string{"tenure run --redisson", "TENURE_REDISSON_FIELD", "--java-watchdog", "--fenced"} {
		if !strings.Contains(out, want) {
			t.Errorf("run --help lacks %q", want)
		}
	}
}

// TestUnknownCommandSuggestion: cobra's suggestion for an unknown command
// goes on a line of its own (it was folded into one line).
func TestUnknownCommandSuggestion(t *testing.T) {
	code, _, stderr := result(t, tenure("statu", "x"))
	if code != exitUsage || !strings.Contains(stderr, "(see 'tenure --help')\nDid you mean this?\n  status\n") {
		t.Errorf("%d %q", code, stderr)
	}
}

// TestRunRedissonRefusalSaidOnce: a refusal of the lock script names the
// lock once (the library's "lease: not acquired: NAME:" repeated it), and
// is still exit 78: errors.Is and the refusal's kind see through it.
func TestRunRedissonRefusalSaidOnce(t *testing.T) {
	s := redistest.Start(t)
	aclSetRule(t, []*redistest.Server{s}, "ACL SETUSER rq-noscript on >rq-pw ~* &* +@all -evalsha -eval")
	code, _, stderr := result(t, on([]string{"REDIS_URL=" + userURL(s, "rq-noscript:rq-pw")}, "run", "--redisson", "rq-refused", "--", "true"))
	if code != exitRefused || strings.Count(stderr, `"rq-refused"`) != 1 || !strings.Contains(stderr, "NOPERM") {
		t.Errorf("%d %q", code, stderr)
	}
}

// TestStatusJSONFindsRedissonLock: "status --json NAME" on a name a
// Redisson lock holds prints the lock, as status --redisson --json does
// (it printed tenure's object of a free name).
func TestStatusJSONFindsRedissonLock(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	c.HSet(ctx, "rsj-java", "6f1c-uuid:42", 2)
	c.PExpire(ctx, "rsj-java", time.Minute)
	t.Cleanup(func() { c.Del(ctx, "rsj-java") })
	code, out, errOut := result(t, tenure("status", "--json", "rsj-java"))
	var got redissonStatus
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("status --json: %d %v\n%s%s", code, err, out, errOut)
	}
	if got.Kind != "redisson-lock" || got.Owners["6f1c-uuid:42"] != 2 || got.TTLms <= 0 {
		t.Errorf("status --json of a Redisson lock: %+v\n%s", got, out)
	}
	_, want, _ := result(t, tenure("status", "--redisson", "--json", "rsj-java"))
	var asRedisson redissonStatus
	if err := json.Unmarshal([]byte(want), &asRedisson); err != nil || asRedisson.Kind != got.Kind || asRedisson.Name != got.Name {
		t.Errorf("status --json says %+v; status --redisson --json %s", got, want)
	}
}

// TestListRedissonSemaphores: list --redisson lists the
// RPermitExpirableSemaphores that match and have a permit taken, with
// their permits, beside the locks (it listed locks only); a semaphore with
// no permit taken is not held, and not listed.
func TestListRedissonSemaphores(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	later := time.Now().Add(time.Hour).UnixMilli()
	c.Set(ctx, "rls-sem", 2, 0)
	c.ZAdd(ctx, "{rls-sem}:timeout", redis.Z{Score: float64(later), Member: "perm-a"}, redis.Z{Score: float64(foreverMs), Member: "perm-b"})
	c.Set(ctx, "rls-idle", 5, 0)
	c.HSet(ctx, "rls-lock", "uuid-a:1", 1)
	t.Cleanup(func() { c.Del(ctx, "rls-sem", "{rls-sem}:timeout", "rls-idle", "rls-lock") })
	code, out, errOut := result(t, tenure("list", "--redisson", "rls-*"))
	if code != 0 || strings.Contains(out, "rls-idle") {
		t.Fatalf("list --redisson: %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"rls-lock redisson-lock none 0 uuid-a:1 (1)", "rls-sem redisson-semaphore none 0 2 permits taken, 2 free"} {
		if !strings.Contains(oneLine(out), want) {
			t.Errorf("list --redisson lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = result(t, tenure("list", "--redisson", "--json", "rls-sem"))
	var got []redissonStatus
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got) != 1 {
		t.Fatalf("list --redisson --json: %d %v\n%s", code, err, out)
	}
	if s := got[0]; s.Kind != "redisson-semaphore" || s.FreePermits == nil || *s.FreePermits != 2 || len(s.Permits) != 2 {
		t.Errorf("list --redisson --json: %+v\n%s", s, out)
	}
}
