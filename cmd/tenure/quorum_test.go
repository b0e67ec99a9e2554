package main

// Quorum mode (several --redis): every command, a minority and a majority
// of nodes down, TLS and ACL, and elect leading by the quorum lease.

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/tests/redistest"
)

// quorumServers starts three servers for quorum mode, and returns them and
// the --redis flags that name them.
func quorumServers(t *testing.T) (servers []*redistest.Server, args []string) {
	t.Helper()
	for range 3 {
		s := redistest.Start(t)
		servers = append(servers, s)
		args = append(args, "--redis", s.URL())
	}
	return servers, args
}

func TestQuorumCLI(t *testing.T) {
	servers, args := quorumServers(t)
	deployRound(t, args, nil, "quo", true)

	// The lease is on every node, under one token.
	code, _, stderr := result(t, on(nil, append(append([]string(nil), args...), "run", "quo-each", "--", "sh", "-c",
		`exit 0`)...))
	if code != 0 {
		t.Fatalf("run: %d %s", code, stderr)
	}
	for _, s := range servers {
		if n := s.Client(t).Exists(context.Background(), "tenure:{quo-each}:fence").Val(); n != 1 {
			t.Errorf("%s has no fence counter of quo-each", s.Addr())
		}
	}

	// A minority down: tenure goes on, and says so.
	if err := servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = result(t, on(nil, append(append([]string(nil), args...), "run", "quo-minority", "--", "true")...))
	if code != 0 || !strings.Contains(stderr, "going on with the 2 of 3 nodes that answered") {
		t.Errorf("run with a node down: %d %s", code, stderr)
	}
	code, out, stderr := result(t, on(nil, append(append([]string(nil), args...), "status", "quo-minority")...))
	if code != 0 || !strings.Contains(out, "no answer") {
		t.Errorf("status with a node down: %d %s %s", code, out, stderr)
	}
	// A majority down: Redis is unreachable.
	if err := servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = result(t, on(nil, append(append([]string(nil), args...), "status", "quo-minority")...))
	if code != exitRedis || !strings.Contains(stderr, "1 of 3 nodes answered, a majority is 2") {
		t.Errorf("status with two nodes down: %d %s", code, stderr)
	}
}

// TestQuorumTLSACL: quorum mode over three TLS servers with client
// certificates, as an ACL user whose password comes from the environment
// (TestSentinelTLSCLI and TestClusterTLSCLI do the same for the other forms).
func TestQuorumTLSACL(t *testing.T) {
	certs := redistest.MustCerts(t)
	const user, pw = "tenure-quo", "quorum-pw-1234"
	var servers []*redistest.Server
	var args []string
	for range 3 {
		s := redistest.Start(t, redistest.Config{TLS: &redistest.TLS{Certs: certs, AuthClients: "yes"}})
		servers = append(servers, s)
		args = append(args, "--redis", userURL(s, user))
	}
	aclSetUser(t, servers, user, pw)
	s := servers[0]
	env := []string{"TENURE_REDIS_PASSWORD=" + pw, "TENURE_TLS_CA=" + s.TLSFile("ca.crt"),
		"TENURE_TLS_CERT=" + s.TLSFile("client.crt"), "TENURE_TLS_KEY=" + s.TLSFile("client.key")}
	stderr := deployRound(t, args, env, "quo-tls", true)
	if strings.Contains(stderr, "NOPERM") || strings.Contains(stderr, pw) {
		t.Errorf("stderr:\n%s", stderr)
	}
	for _, s := range servers {
		if log := s.ACLLog(t); len(log) > 0 {
			t.Errorf("%s: the ACL LOG has refusals:\n%s", s.Addr(), strings.Join(log, "\n"))
		}
	}
}

// TestQuorumElect: in quorum mode elect leads by the lease alone: one
// leader at a time (the second candidate's command starts only after the
// first's ended), the leader's identity as the holder status shows, its
// term in TENURE_FENCE, and a lost lease stops the command with the lost
// status.
func TestQuorumElect(t *testing.T) {
	servers, args := quorumServers(t)
	with := func(more ...string) []string { return append(append([]string(nil), args...), more...) }
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	step := func(id string) string {
		return fmt.Sprintf(`echo start %s $TENURE_FENCE >> %s; sleep 1; echo end %s >> %s`, id, log, id, log)
	}
	a := on(nil, with("elect", "--ttl", "2s", "--identity", "cand-a", "quo-lead", "--", "sh", "-c", step("a"))...)
	b := on(nil, with("elect", "--ttl", "2s", "--identity", "cand-b", "quo-lead", "--", "sh", "-c", step("b"))...)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, log, 1, 30*time.Second)
	code, out, stderr := result(t, on(nil, with("status", "quo-lead")...))
	if code != 0 || !strings.Contains(out, "cand-a") {
		t.Errorf("status while cand-a leads: %d %s %s", code, out, stderr)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, a, 30*time.Second); code != 0 {
		t.Fatalf("cand-a: exit %d", code)
	}
	if code := exitOf(t, b, 30*time.Second); code != 0 {
		t.Fatalf("cand-b: exit %d", code)
	}
	lines := waitFile(t, log, 4, 10*time.Second)
	if !strings.HasPrefix(lines[0], "start a ") || lines[1] != "end a" || !strings.HasPrefix(lines[2], "start b ") || lines[3] != "end b" {
		t.Fatalf("terms overlap or are out of order: %q", lines)
	}
	fa, _ := strconv.ParseInt(strings.Fields(lines[0])[2], 10, 64)
	fb, _ := strconv.ParseInt(strings.Fields(lines[2])[2], 10, 64)
	if fa <= 0 || fb <= fa {
		t.Errorf("terms %d then %d: want increasing fences", fa, fb)
	}

	// The lease deleted on a majority of nodes: the command is stopped.
	c := on(nil, with("elect", "--ttl", "1s", "--identity", "cand-c", "quo-lost", "--", "sleep", "60")...)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); servers[0].Client(t).Exists(context.Background(), "tenure:{quo-lost}").Val() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("cand-c never took quo-lost")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, s := range servers[:2] {
		s.Client(t).Del(context.Background(), "tenure:{quo-lost}")
	}
	if code := exitOf(t, c, 30*time.Second); code != exitLost {
		t.Fatalf("cand-c after its lease was deleted on a majority: exit %d, want %d", code, exitLost)
	}
}
