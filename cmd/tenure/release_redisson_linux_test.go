package main

// "tenure release --force --redisson" revokes a Redisson lock
// (redisson_revoke.lua): the hash stays held, by revocation fields, until
// the "tenure run --redisson" holder has confirmed that its command is
// dead, or until the hash's TTL runs out. As in revoke_linux_test.go, the
// tests check order, not the clock.

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReleaseForceRedissonKeepsS9: a command that ignores SIGTERM holds a
// Redisson lock; a second run waits for it; release --force --redisson
// revokes the first. The second run's command, when it starts, finds
// nothing of the first command's group alive, and the name was held
// (revoked) in between, for Java and Go lockers alike.
func TestReleaseForceRedissonKeepsS9(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	dir := t.TempDir()
	pidFile, out := filepath.Join(dir, "pids"), filepath.Join(dir, "out")
	var stderrA bytes.Buffer
	a := tenure("run", "--redisson", "--ttl", "6s", "rl-revoke-s9", "--", "sh", "-c", stubborn, "sh", pidFile)
	a.Stderr = &stderrA
	pgid, _ := startStubborn(t, a, pidFile)
	b := tenure("run", "--redisson", "--wait", "60s", "--ttl", "5s", "rl-revoke-s9", "--", "sh", "-c", lookout, "sh", strconv.Itoa(pgid), out)
	var stderrB syncBuffer
	b.Stderr = &stderrB
	startBackground(t, b)

	code, stdout, stderr := result(t, tenure("release", "--force", "--redisson", "rl-revoke-s9"))
	if code != 0 || !strings.Contains(stdout, `revoked Redisson lock "rl-revoke-s9"`) || strings.Contains(stderr, "--now") {
		t.Fatalf("release --force --redisson: %d %s %s", code, stdout, stderr)
	}
	// Held still, by a field no Java or Go owner has: a Java tryLock
	// finds it held.
	if got := c.HGetAll(ctx, "rl-revoke-s9").Val(); len(got) != 1 || !strings.HasPrefix(firstKey(got), "tenure-revoked:") {
		t.Errorf("after the revocation the hash is %v, want one revocation field", got)
	}
	if code := exitOf(t, b, 60*time.Second); code != 0 {
		t.Fatalf("the second run exited %d: %s", code, stderrB.String())
	}
	checkLookout(t, out, pgid)
	if code := exitOf(t, a, 30*time.Second); code != exitLost {
		t.Errorf("the revoked run exited %d, want %d; stderr: %s", code, exitLost, stderrA.String())
	}
}

func firstKey(m map[string]string) string {
	for k := range m {
		return k
	}
	return ""
}

// TestReleaseForceRedissonConfirmed: a command that obeys SIGTERM is
// revoked; its tenure hears it at once, stops the command and confirms,
// which frees the name well before the hash's 30s TTL: a second run that
// waits 20s at most gets it, and finds nothing of the first group alive.
// status --redisson shows the revocation with its time left; a second
// release changes nothing; --now deletes at once and warns.
func TestReleaseForceRedissonConfirmed(t *testing.T) {
	dir := t.TempDir()
	pidFile, out := filepath.Join(dir, "pids"), filepath.Join(dir, "out")
	var stderrA bytes.Buffer
	obeying := `sleep 300 & echo $$ $! > "$1"; wait`
	a := tenure("run", "--redisson", "rl-revoke-ok", "--", "sh", "-c", obeying, "sh", pidFile)
	a.Stderr = &stderrA
	pgid, _ := startStubborn(t, a, pidFile)
	if code, stdout, stderr := result(t, tenure("release", "--force", "--redisson", "rl-revoke-ok")); code != 0 || !strings.Contains(stdout, "revoked") {
		t.Fatalf("release --force --redisson: %d %s %s", code, stdout, stderr)
	}
	b := tenure("run", "--redisson", "--wait", "20s", "rl-revoke-ok", "--", "sh", "-c", lookout, "sh", strconv.Itoa(pgid), out)
	if code, _, stderr := result(t, b); code != 0 {
		t.Fatalf("the second run exited %d (not freed by the confirmation?): %s", code, stderr)
	}
	checkLookout(t, out, pgid)
	if code := exitOf(t, a, 60*time.Second); code != exitLost || !strings.Contains(stderrA.String(), redissonRevokedText) {
		t.Errorf("the revoked run exited %d, want %d, saying it confirmed; stderr: %s", code, exitLost, stderrA.String())
	}
}

// TestReleaseForceRedissonUnconfirmed: a holder that never confirms (a
// Java one, here its field as Redisson's lock script leaves it) keeps the
// name held by its revocation until the TTL: status --redisson shows it
// revoked with the time left, a second release changes nothing, and --now
// deletes it at once. --now on a held lock warns of the overlap.
func TestReleaseForceRedissonUnconfirmed(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	c.HSet(ctx, "rl-revoke-java", "6f1c-uuid:42", 2)
	c.PExpire(ctx, "rl-revoke-java", time.Minute)
	t.Cleanup(func() { c.Del(ctx, "rl-revoke-java") })
	if code, stdout, stderr := result(t, tenure("release", "--force", "--redisson", "rl-revoke-java")); code != 0 ||
		!strings.Contains(stdout, "6f1c-uuid:42 (2)") {
		t.Fatalf("release --force --redisson: %d %s %s", code, stdout, stderr)
	}
	code, stdout, _ := result(t, tenure("status", "--redisson", "rl-revoke-java"))
	if code != 0 || !strings.Contains(stdout, "revoked  6f1c-uuid:42 (2): held until") {
		t.Errorf("status --redisson of a revoked lock: %d\n%s", code, stdout)
	}
	if code, _, _ := result(t, tenure("status", "--redisson", "--check", "rl-revoke-java")); code != 0 {
		t.Errorf("status --redisson --check of a revoked lock: %d, want 0 (held)", code)
	}
	if code, _, stderr := result(t, tenure("run", "--redisson", "--wait", "0", "rl-revoke-java", "--", "true")); code != exitTimeout {
		t.Errorf("a revoked lock was taken: %d %s", code, stderr)
	}
	if code, stdout, _ := result(t, tenure("release", "--force", "--redisson", "rl-revoke-java")); code != 0 || !strings.Contains(stdout, "already revoked") {
		t.Errorf("a second release: %d %s", code, stdout)
	}
	if code, stdout, _ := result(t, tenure("release", "--force", "--now", "--redisson", "rl-revoke-java")); code != 0 ||
		!strings.Contains(stdout, "removed the revocation") || c.Exists(ctx, "rl-revoke-java").Val() != 0 {
		t.Errorf("--now on a revoked lock: %d %s", code, stdout)
	}
	c.HSet(ctx, "rl-revoke-java", "6f1c-uuid:42", 1)
	c.PExpire(ctx, "rl-revoke-java", time.Minute)
	if code, _, stderr := result(t, tenure("release", "--force", "--now", "--redisson", "rl-revoke-java")); code != 0 ||
		!strings.Contains(stderr, "beside the next holder's") || c.Exists(ctx, "rl-revoke-java").Val() != 0 {
		t.Errorf("--now on a held lock: %d %s", code, stderr)
	}
	c.Set(ctx, "rl-revoke-java", "x", time.Minute)
	if code, _, stderr := result(t, tenure("release", "--force", "--redisson", "rl-revoke-java")); code != exitError ||
		!strings.Contains(stderr, "not a Redisson lock") {
		t.Errorf("a string key: %d %s", code, stderr)
	}
}

// TestRunRedissonHearsJavaForce: what Java's forceUnlock sends (DEL of the
// hash, "0" on its channel) stops a run at once, at the default 30s TTL,
// rather than at its next renewal: the run says the field was found gone
// by the message (force-unlocked), not by a renewal.
func TestRunRedissonHearsJavaForce(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "started")
	run := tenure("run", "--redisson", "rl-jforce", "--", "sh", "-c", `echo up > "$0"; sleep 300`, file)
	var stderr syncBuffer
	run.Stderr = &stderr
	startBackground(t, run)
	waitFile(t, file, 1, 20*time.Second)
	for give := time.Now().Add(30 * time.Second); c.PubSubNumSub(ctx, "redisson_lock__channel:{rl-jforce}").Val()["redisson_lock__channel:{rl-jforce}"] < 1; {
		if time.Now().After(give) {
			t.Fatal("the run never listened on its lock's channel")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Del(ctx, "rl-jforce")
	c.Publish(ctx, "redisson_lock__channel:{rl-jforce}", "0")
	if code := exitOf(t, run, 60*time.Second); code != exitLost {
		t.Fatalf("exit %d, want %d: %s", code, exitLost, stderr.String())
	}
	if !strings.Contains(stderr.String(), "force-unlocked") {
		t.Errorf("the run did not learn of the force from its message: %s", stderr.String())
	}
}
