package main

// What the tests of each deployment (sentinel_test.go, cluster_test.go,
// quorum_test.go) share: a round of every command, and ACL users.

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/tests/redistest"
)

// deployRound runs each operator and holder command of tenure against the
// deployment redisArgs (--redis flags) name, with env: run, elect (refused
// in quorum mode), a holder, status, list, release --force of the holder,
// which then exits 77. It returns every stderr written.
func deployRound(t *testing.T, redisArgs, env []string, tag string, quorum bool) string {
	t.Helper()
	var all strings.Builder
	check := func(want int, args ...string) string {
		t.Helper()
		code, out, stderr := result(t, on(env, append(append([]string(nil), redisArgs...), args...)...))
		all.WriteString(stderr)
		if code != want {
			t.Fatalf("%v: status %d, want %d; stderr: %s", args, code, want, stderr)
		}
		return out
	}
	check(0, "run", "--ttl", "5s", tag+"-run", "--", "true")
	check(0, "elect", "--ttl", "5s", "--identity", "e-"+tag, tag+"-elect", "--", "true")
	if quorum {
		check(exitUsage, "run", "-n", "2", tag+"-sem", "--", "true")
	}

	held := filepath.Join(t.TempDir(), "held")
	loop := `echo up >> "$1"; while :; do sleep 0.05; done`
	holder := on(env, append(append([]string(nil), redisArgs...),
		"run", "--ttl", "5s", "--holder", "h-"+tag, tag+"-held", "--", "sh", "-c", loop, "sh", held)...)
	var holderErr bytes.Buffer
	holder.Stderr = &holderErr
	startBackground(t, holder)
	waitFile(t, held, 1, 30*time.Second)

	out := check(0, "status", tag+"-held")
	if !regexp.MustCompile(`kind\s+lease`).MatchString(out) || !strings.Contains(out, "h-"+tag) {
		t.Errorf("status while held:\n%s", out)
	}
	if quorum && strings.Count(out, "\nnode ") != 3 {
		t.Errorf("status in quorum mode shows no line for each node:\n%s", out)
	}
	out = check(0, "list", tag+"-*")
	if !strings.Contains(out, tag+"-held") || !strings.Contains(out, "h-"+tag) || strings.Contains(out, tag+"-run") {
		t.Errorf("list:\n%s", out)
	}
	out = check(0, "release", "--force", tag+"-held")
	if !strings.Contains(out, fmt.Sprintf("revoked the lease on %q", tag+"-held")) {
		t.Errorf("release --force:\n%s", out)
	}
	if code := exitOf(t, holder, 60*time.Second); code != exitLost {
		t.Errorf("the holder exited %d after release --force, want %d: %s", code, exitLost, holderErr.String())
	}
	all.WriteString(holderErr.String())
	out = check(0, "status", tag+"-held")
	if !regexp.MustCompile(`kind\s+free`).MatchString(out) {
		t.Errorf("status after release --force:\n%s", out)
	}
	return all.String()
}

// aclSetUser gives every server the least-privilege tenure user of
// docs/security.md's single-server line.
func aclSetUser(t *testing.T, servers []*redistest.Server, user, password string) {
	t.Helper()
	aclSetRule(t, servers, redistest.ACLRule(user, password, "tenure:"))
}

// aclSetRule runs the ACL SETUSER line rule on every server, as
// docs/security.md gives it for the server (redistest.Server.FitRule).
func aclSetRule(t *testing.T, servers []*redistest.Server, rule string) {
	t.Helper()
	for _, s := range servers {
		c := s.NewClient()
		var args []any
		for _, f := range strings.Fields(s.FitRule(t, rule)) {
			args = append(args, f)
		}
		err := c.Do(context.Background(), args...).Err()
		c.Close()
		if err != nil {
			t.Fatalf("%s: %v", s.Addr(), err)
		}
	}
}
