package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// "tenure run --redisson" holds Redisson's RLock as a Java service's
// Redisson would see it, runs the command under it, and unlocks it.
func TestRunRedisson(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "field")
	run := tenure("run", "--redisson", "rl-orders", "--", "sh", "-c",
		`echo "$TENURE_REDISSON_FIELD" > "$0"; while [ ! -e "$0.done" ]; do sleep 0.02; done; exit 3`, file)
	startBackground(t, run)
	field := waitFile(t, file, 1, 20*time.Second)[0]
	if got := c.HGetAll(ctx, "rl-orders").Val(); len(got) != 1 || got[field] != "1" {
		t.Fatalf("while the command runs the hash is %v, want {%s: 1}", got, field)
	}
	if pttl := c.PTTL(ctx, "rl-orders").Val(); pttl <= 0 {
		t.Fatalf("PTTL %v", pttl)
	}
	code, out, _ := result(t, tenure("status", "--redisson", "rl-orders"))
	if code != 0 || !strings.Contains(out, "redisson-lock") || !strings.Contains(out, field+" (1)") {
		t.Fatalf("status --redisson: %d\n%s", code, out)
	}
	if err := os.WriteFile(file+".done", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, run, 20*time.Second); code != 3 {
		t.Fatalf("exit %d, want the command's 3", code)
	}
	if n := c.Exists(ctx, "rl-orders").Val(); n != 0 {
		t.Fatal("the hash outlived the run")
	}
}

// A name a Java holder has (its field and count, as Redisson's lock script
// leaves them) is held: --wait 0 exits with --held-exit, naming the owner.
func TestRunRedissonHeldByJava(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	c.HSet(ctx, "rl-java", "6f1c-uuid:42", 2)
	c.PExpire(ctx, "rl-java", time.Minute)
	t.Cleanup(func() { c.Del(ctx, "rl-java") })
	code, _, errOut := result(t, tenure("run", "--redisson", "--wait", "0", "rl-java", "--", "true"))
	if code != exitTimeout || !strings.Contains(errOut, "6f1c-uuid:42 (2)") {
		t.Fatalf("exit %d, stderr %q; want %d naming the Java owner", code, errOut, exitTimeout)
	}
	code, out, _ := result(t, tenure("status", "--redisson", "--json", "rl-java"))
	if code != 0 || !strings.Contains(out, `"6f1c-uuid:42": 2`) || !strings.Contains(out, `"kind": "redisson-lock"`) ||
		!strings.Contains(out, `"waiting": 0`) {
		t.Fatalf("status --redisson --json: %d\n%s", code, out)
	}
	// Two Java RFairLock waiters, queued as Redisson's lock script queues
	// them.
	c.RPush(ctx, "redisson_lock_queue:{rl-java}", "6f1c-uuid:43", "6f1c-uuid:44")
	t.Cleanup(func() { c.Del(ctx, "redisson_lock_queue:{rl-java}") })
	code, out, _ = result(t, tenure("status", "--redisson", "rl-java"))
	if code != 0 || !strings.Contains(out, "waiting  2 (RFairLock queue)") {
		t.Fatalf("status --redisson with two fair waiters: %d\n%s", code, out)
	}
	if code, _, _ := result(t, tenure("status", "--redisson", "--check", "rl-free")); code != exitFree {
		t.Fatalf("status --redisson --check of a free name: %d", code)
	}
}

// The hash deleted under a run (a Java admin's forceUnlock) stops the
// command at the next renewal, with --lost-exit.
func TestRunRedissonLost(t *testing.T) {
	c := client(t)
	file := filepath.Join(t.TempDir(), "started")
	run := tenure("run", "--redisson", "--ttl", "1s", "rl-lost", "--", "sh", "-c", `echo up > "$0"; sleep 30`, file)
	startBackground(t, run)
	waitFile(t, file, 1, 20*time.Second)
	c.Del(context.Background(), "rl-lost")
	if code := exitOf(t, run, 20*time.Second); code != exitLost {
		t.Fatalf("exit %d, want %d", code, exitLost)
	}
}

// A TTL above Java's lockWatchdogTimeout is refused: a Java reader's
// renewal would cut it short.
func TestRunRedissonTTLAboveJavas(t *testing.T) {
	code, _, errOut := result(t, tenure("run", "--redisson", "--ttl", "1m", "rl-ttl", "--", "true"))
	if code != exitUsage || !strings.Contains(errOut, "exceeds") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}
