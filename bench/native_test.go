package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// replyError is an error reply as go-redis hands it over: a redis.Error.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// TestMissingCommand: scenario 13 reports a variant "not on this server"
// only for the server's answers to a command or an option it lacks, and
// fails on any other error rather than call a refused command missing.
func TestMissingCommand(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{replyError("ERR unknown command 'DELIFEQ', with args beginning with: 'k' 'x' "), true},
		{replyError("ERR unknown command 'DELEX', with args beginning with: 'k' 'IFEQ' 'x' "), true},
		{replyError("ERR syntax error"), true}, // SET … IFEQ on Redis 8.0
		{fmt.Errorf("probing: %w", replyError("ERR syntax error")), true},
		{replyError("NOPERM User u has no permissions to run the 'delifeq' command"), false},
		{replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{errors.New("ERR unknown command 'DELIFEQ'"), false}, // not a reply
		{redis.Nil, false},
		{nil, false},
	} {
		if got := missingCommand(c.err); got != c.want {
			t.Errorf("missingCommand(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestServerVersion: Valkey's INFO says redis_version 7.2.4 for clients'
// sake; the report's header names Valkey and its own version.
func TestServerVersion(t *testing.T) {
	valkey := "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\nredis_mode:standalone\r\n"
	redis8 := "# Server\r\nredis_version:8.0.2\r\nredis_git_sha1:00000000\r\n"
	for info, want := range map[string]string{valkey: "Valkey 9.1.2", redis8: "Redis 8.0.2", "": "unknown"} {
		if got := serverVersion(info); got != want {
			t.Errorf("serverVersion(%q) = %q, want %q", info, got, want)
		}
	}
}

// TestProbeCommands asks the server the tests run on (REDIS_SERVER, else
// redis-server 7.0.15 on PATH) which native commands it lacks, and checks
// the answer for the servers tests/servers/fetch.sh provides.
func TestProbeCommands(t *testing.T) {
	srv, err := startLoopbackServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c, _ := newClient(srv.Addr(), 1)
	defer c.Close()
	ctx := context.Background()
	version := serverVersion(c.Info(ctx, "server").Val())
	missing, err := probeCommands(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(maps.Keys(missing))
	var want []string
	switch {
	case strings.HasPrefix(version, "Redis 7."), strings.HasPrefix(version, "Redis 8.0."):
		want = []string{"DELEX", "DELIFEQ", "SET IFEQ"}
	case strings.HasPrefix(version, "Valkey 8.1."):
		want = []string{"DELEX", "DELIFEQ"}
	case strings.HasPrefix(version, "Valkey 9.0."), strings.HasPrefix(version, "Valkey 9.1."):
		want = []string{"DELEX"}
	default:
		t.Skipf("%s: which native commands it has is not known to this test", version)
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s lacks %v, want %v (answers: %v)", version, got, want, missing)
	}
	for cmd, answer := range missing {
		if !strings.HasPrefix(answer, "ERR ") {
			t.Errorf("%s: %s's answer %q is not the server's", version, cmd, answer)
		}
	}
}

// TestNativeProbes runs scenario 13's probes on the test server: one row
// per promise for each native command the server has, the library's
// scripts keeping each promise, and on the Valkey versions fetch.sh
// provides (REDIS_SERVER) the native commands keeping none of them.
func TestNativeProbes(t *testing.T) {
	srv, err := startLoopbackServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c, _ := newClient(srv.Addr(), 2)
	defer c.Close()
	ctx := context.Background()
	missing, err := probeCommands(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	probes, err := nativeProbes(ctx, c, missing)
	if err != nil {
		t.Fatal(err)
	}
	want := 0 // three renewal probes with SET IFEQ, two per delete command
	for cmd, rows := range map[string]int{"SET IFEQ": 3, "DELIFEQ": 2, "DELEX": 2} {
		if _, no := missing[cmd]; !no {
			want += rows
		}
	}
	if len(probes) != want {
		t.Fatalf("%d probes, want %d (missing %v)", len(probes), want, missing)
	}
	tenureKeeps := map[string]string{
		"S8: a renewal never shortens a lease":              "PTTL 1m0s",
		"S3: a resent release is answered as the first was": "success, then success",
		"section 5: a release wakes the waiters":            "a message",
	}
	for _, p := range probes {
		if w, ok := tenureKeeps[p.promise]; ok && p.tenure != w {
			t.Errorf("%s: tenure answered %q, want %q", p.promise, p.tenure, w)
		}
		if p.kept {
			t.Errorf("%s: the native path %q keeps it, unlike on Valkey 8.1 and 9.1", p.promise, p.native)
		}
	}
}
