package main

// Exit statuses and usage errors of every command, through the built binary.

import (
	"context"
	"strings"
	"testing"
	"time"
)

// anyButUsage is a TestExitStatuses status: the command ran (0), or was
// stopped for want of a renewal in time (exitLost), never a usage error.
const anyButUsage = -1

func TestExitStatuses(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	if err := c.Set(ctx, "tenure:{busy}", "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Del(ctx, "tenure:{busy}") })
	for _, tc := range exitStatusCases() {
		t.Run(tc.what, func(t *testing.T) {
			code, _, stderr := result(t, tenure(tc.args...))
			if tc.status == anyButUsage {
				if code != 0 && code != exitLost {
					t.Errorf("status %d, want 0 or %d (no usage error); stderr: %s", code, exitLost, stderr)
				}
				return
			}
			if code != tc.status {
				t.Errorf("status %d, want %d; stderr: %s", code, tc.status, stderr)
			}
			if !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr %q does not mention %q", stderr, tc.stderr)
			}
			// A run that waits says so once before its last word.
			n := strings.Count(stderr, "\n") - strings.Count(stderr, "; waiting for it (--wait ")
			if code != 0 && tc.stderr != "" && n != 1 {
				t.Errorf("stderr has %d lines, want one: %q", n, stderr)
			}
		})
	}
	if n, _ := c.Exists(ctx, "tenure:{s1}").Result(); n != 0 {
		t.Error("a run left its lease held")
	}
}

// exitStatusCase is one run of tenure in TestExitStatuses: its status, and
// what its stderr mentions.
type exitStatusCase struct {
	what   string
	args   []string
	status int
	stderr string
}

// exitStatusCases are TestExitStatuses' runs.
func exitStatusCases() []exitStatusCase {
	return []exitStatusCase{
		{"the command's status", []string{"run", "s1", "--", "sh", "-c", "exit 7"}, 7, ""},
		{"success", []string{"run", "s1", "--", "true"}, 0, ""},
		{"killed by a signal", []string{"run", "s1", "--", "sh", "-c", "kill -KILL $$"}, 128 + 9, ""},
		{"not found", []string{"run", "s1", "--", "no-such-command-here"}, exitNoCmd, "not found"},
		{"no command after --", []string{"run", "s1", "--"}, exitUsage, "NAME -- COMMAND"},
		// COMMAND may follow NAME without "--", as with flock; it was a
		// usage error.
		{"no dash", []string{"run", "s1", "true"}, 0, ""},
		{"no dash, the command's own flags", []string{"run", "--ttl", "5s", "s1", "sh", "-c", "exit 7"}, 7, ""},
		// The form with tenure's flags after NAME, then "--", still works.
		{"flags after NAME, then --", []string{"run", "s1", "--ttl", "5s", "--", "sh", "-c", "exit 6"}, 6, ""},
		{"flags after NAME, no --", []string{"run", "s1", "--ttl", "5s", "true"}, exitUsage, `"true" after NAME and flags`},
		{"a bad flag after NAME", []string{"run", "s1", "--nope", "--", "true"}, exitUsage, "unknown flag: --nope"},
		{"elect, no dash", []string{"elect", "--ttl", "5s", "s1", "sh", "-c", "exit 4"}, 4, ""},
		{"elect, flags after NAME, then --", []string{"elect", "s1", "--ttl", "5s", "--", "sh", "-c", "exit 3"}, 3, ""},
		{"bad flag", []string{"run", "--nope", "s1", "--", "true"}, exitUsage, "unknown flag"},
		{"bad duration", []string{"run", "--wait", "soon", "s1", "--", "true"}, exitUsage, `"soon" is neither a duration nor "forever"`},
		{"wait never", []string{"run", "--wait", "never", "s1", "--", "true"}, exitUsage,
			`--wait takes a duration with a unit ("10s", "1m", "1h30m"), 0 for one attempt, or "forever"`},
		{"ttl without a unit", []string{"run", "--ttl", "5", "s1", "--", "true"}, exitUsage, `duration "5" has no unit: say "5s"`},
		{"grace without a unit", []string{"elect", "--grace", "1.5", "s1", "--", "true"}, exitUsage, `duration "1.5" has no unit: say "1.5s"`},
		{"wait without a unit", []string{"run", "--wait", "10", "s1", "--", "true"}, exitUsage, `duration "10" has no unit`},
		{"release timeout without a unit", []string{"run", "--release-timeout", "2", "s1", "--", "true"}, exitUsage, `duration "2" has no unit`},
		{"interval without a unit", []string{"status", "--watch", "--interval", "1", "s1"}, exitUsage, `duration "1" has no unit`},
		{"elect has no --wait", []string{"elect", "--wait", "1s", "s1", "--", "true"}, exitUsage, "unknown flag: --wait"},
		{"unclosed class", []string{"list", "["}, exitUsage, `bad PATTERN "[": the [ at byte 0 opens a class that no ] closes`},
		{"trailing backslash", []string{"list", `s\`}, exitUsage, `bad PATTERN "s\\": it ends in a backslash`},
		{"observe with a command", []string{"elect", "--observe", "s1", "--", "true"}, exitUsage, "--observe takes NAME alone"},
		{"observe with a candidate's flag", []string{"elect", "--observe", "--ttl", "5s", "s1"}, exitUsage, "--ttl is a candidate's"},
		{"status of two names", []string{"status", "s1", "s2"}, exitUsage, "only --watch takes several"},
		{"interval without --watch", []string{"status", "--interval", "1s", "s1"}, exitUsage, "--interval is --watch's"},
		{"short ttl", []string{"run", "--ttl", "1ms", "s1", "--", "true"}, exitUsage, "below the minimum"},
		{"grace too long", []string{"run", "--ttl", "300ms", "--grace", "1s", "s1", "--", "true"}, exitUsage, "the largest --grace for --ttl 300ms is 170ms"},
		{"grace just too long", []string{"elect", "--ttl", "30s", "--grace", "17.199s", "s1", "--", "true"}, exitUsage, "the largest --grace for --ttl 30s is 17.198s"},
		{"grace at the limit", []string{"run", "--ttl", "300ms", "--grace", "170ms", "s1", "--", "true"}, anyButUsage, ""},
		// The default grace fits the shortest TTL: no usage error. Whether
		// `true` finishes within the 8ms the lease is trusted for depends
		// on the machine's load, so either outcome of the run is right.
		{"default grace, shortest ttl", []string{"run", "--ttl", "10ms", "s1", "--", "true"}, anyButUsage, ""},
		{"default grace, short ttl", []string{"run", "--ttl", "300ms", "s1", "--", "true"}, 0, ""},
		{"bad name", []string{"run", "}x", "--", "true"}, exitUsage, "starts with"},
		{"unknown command", []string{"frobnicate"}, exitUsage, "unknown command"},
		{"release without --force", []string{"release", "s1"}, exitUsage, "--force"},
		{"bad redis URL", []string{"--redis", "http://x", "status", "s1"}, exitUsage, "redis URL"},
		{"redis unreachable", []string{"--redis", "redis://127.0.0.1:1", "run", "s1", "--", "true"}, exitRedis, "127.0.0.1:1"},
		{"wait runs out", []string{"run", "--wait", "200ms", "busy", "--", "true"}, exitTimeout, "not acquired"},
		{"one attempt", []string{"run", "--wait", "0", "busy", "--", "true"}, exitTimeout, "not acquired"},
	}
}
