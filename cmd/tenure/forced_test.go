package main

// A holder (a hold, a permit, a leader, a command) notices "release --force"
// at once, not at its next renewal (forced.go).

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReleaseForceNoticedAtOnce: a holder whose NAME is taken by "release
// --force" stops with 77 at once, not at its next renewal (TTL/3: here,
// with a 5m TTL, 100s away): a command, a hold, a permit and a leader
// alone, each told by the name's release message to check its lease. No
// renewal comes before the loss (-vv logs each), so it was the message.
// Revoked (the default), each confirms once nothing of it runs, and says
// so: the name is free at once, not at its TTL. With --now the key is
// simply gone.
func TestReleaseForceNoticedAtOnce(t *testing.T) {
	type tcase struct {
		what string
		args []string
		want string
		now  bool
	}
	cases := []tcase{
		{"a hold", []string{"run"}, `the lease on "forced-a-hold" was lost while held: ` + revokedText, false},
		{"a permit", []string{"run", "-n", "2"}, `the permit of "forced-a-permit" was lost while held: ` + revokedText, false},
		{"a leader", []string{"elect"}, `leadership of "forced-a-leader" (term `, false},
		{"a command", []string{"run"}, `the lease on "forced-a-command" was lost while the command ran: ` + revokedText, false},
		{"a hold now", []string{"run"}, `the lease on "forced-a-hold-now" was lost while held: its key was deleted`, true},
		{"a permit now", []string{"run", "-n", "2"}, `the permit of "forced-a-permit-now" was lost while held: its permit was removed`, true},
		{"a command now", []string{"run"}, `the lease on "forced-a-command-now" was lost while the command ran: its key was deleted`, true},
	}
	for _, tc := range cases {
		t.Run(tc.what, func(t *testing.T) {
			name := "forced-" + strings.ReplaceAll(tc.what, " ", "-")
			args := append(append([]string{"-vv"}, tc.args...), "--ttl", "5m", name)
			var stderr *syncBuffer
			var done func() int
			if strings.HasPrefix(tc.what, "a command") {
				up := filepath.Join(t.TempDir(), "up")
				c := tenure(append(args, "sh", "-c", `echo up > "$1"; sleep 120`, "sh", up)...)
				stderr = &syncBuffer{}
				c.Stderr = stderr
				startBackground(t, c)
				waitFile(t, up, 1, 30*time.Second)
				done = func() int { return exitOf(t, c, 60*time.Second) }
			} else {
				h := startHold(t, tenure(args...))
				stderr = h.stderr
				done = func() int { return exitOf(t, h.cmd, 60*time.Second) }
			}
			force, did := []string{"release", "--force", name}, "revoked"
			if tc.now {
				force, did = []string{"release", "--force", "--now", name}, "removed"
			}
			if code, out, errOut := result(t, tenure(force...)); code != 0 || !strings.Contains(out, did) {
				t.Fatalf("release --force: %d %s %s", code, out, errOut)
			}
			// 60s is well before the first renewal (100s).
			if code := done(); code != exitLost {
				t.Errorf("status %d, want %d; stderr: %s", code, exitLost, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) || strings.Contains(stderr.String(), "msg=renewed") ||
				(!tc.now && !strings.Contains(stderr.String(), revokedText)) {
				t.Errorf("stderr lacks %q, or a renewal came first: %s", tc.want, stderr.String())
			}
			if n, _ := client(t).Exists(context.Background(), "tenure:{"+name+"}").Result(); n != 0 {
				t.Error("the name is held again")
			}
		})
	}
}

// TestReleaseForceDeletesWithoutTTL: a key without a TTL, and a key of a
// type tenure did not write, are deleted, not revoked: there is no
// holder's TTL to wait out, and a marker without one would bar the name
// for ever.
func TestReleaseForceDeletesWithoutTTL(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	c.Set(ctx, "tenure:{forced-no-ttl}", "0123456789abcdef.ops/1", 0)
	c.RPush(ctx, "tenure:{forced-list}", "x")
	c.Expire(ctx, "tenure:{forced-list}", time.Minute)
	for _, name := range []string{"forced-no-ttl", "forced-list"} {
		code, out, stderr := result(t, tenure("release", "--force", name))
		if code != 0 || !strings.Contains(out, "removed") || strings.Contains(out, "revoked") {
			t.Errorf("release --force %s: %d %s %s", name, code, out, stderr)
		}
		if n := c.Exists(ctx, "tenure:{"+name+"}").Val(); n != 0 {
			t.Errorf("release --force %s left the key", name)
		}
	}
}
