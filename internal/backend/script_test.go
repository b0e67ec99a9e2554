package backend

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/tests/redistest"
)

// A TTL reaches a script in whole milliseconds rounded up, never below
// the duration the local deadline counts (S2).
func TestMillisecondsRoundUp(t *testing.T) {
	var box atomic.Pointer[msBox]
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{
		{0, 0},
		{time.Nanosecond, 1},
		{999 * time.Microsecond, 1},
		{time.Millisecond, 1},
		{time.Second, 1000},
		{time.Second + time.Nanosecond, 1001},
		{time.Second + 700*time.Microsecond, 1001},
		{30 * time.Second, 30000},
	} {
		if got := ms(c.d); got != c.want {
			t.Errorf("ms(%v) = %d, want %d", c.d, got, c.want)
		}
		if got := msArg(&box, c.d); got != c.want {
			t.Errorf("msArg(%v) = %v, want %d", c.d, got, c.want)
		}
	}
}

// calls returns how many times the server ran each of cmds since the last
// CONFIG RESETSTAT (INFO commandstats), by name ("evalsha", "script|load").
func calls(t *testing.T, c *redis.Client, cmds ...string) map[string]int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]int, len(cmds))
	for _, line := range strings.Split(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		name = strings.TrimPrefix(name, "cmdstat_")
		if !ok || !slices.Contains(cmds, name) {
			continue
		}
		n, _ := strconv.Atoi(stats[:strings.IndexByte(stats, ',')])
		out[name] = n
	}
	return out
}

func resetStats(t *testing.T, c *redis.Client) {
	t.Helper()
	if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

const echoSrc = "return {KEYS[1], ARGV[1]}"

// In FIPS mode a script's SHA comes from the server: the first call sends
// SCRIPT LOAD and EVALSHA, the later ones EVALSHA alone; after SCRIPT
// FLUSH (what a restart loses) the server answers NOSCRIPT, EVAL runs the
// script and leaves it there, and EVALSHA works again.
func TestScriptSHAFromServer(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	s := newScript(echoSrc, false)
	if s.sha.Load() != nil {
		t.Fatal("a FIPS-mode script has a SHA before any server told it")
	}
	run := func(arg string) {
		t.Helper()
		v, err := s.Run(ctx, c, []string{"k"}, arg).StringSlice()
		if err != nil || !slices.Equal(v, []string{"k", arg}) {
			t.Fatalf("Run: %q, %v", v, err)
		}
	}
	resetStats(t, c)
	run("1")
	run("2")
	want := sha1.Sum([]byte(echoSrc))
	if got, _ := s.load(ctx, c, "k").(string); got != hex.EncodeToString(want[:]) {
		t.Fatalf("SHA %q, want the script's SHA1 %x", got, want)
	}
	cmds := []string{"script|load", "evalsha", "eval"}
	if n := calls(t, c, cmds...); n["script|load"] != 1 || n["evalsha"] != 2 || n["eval"] != 0 {
		t.Fatalf("two calls sent %v, want one SCRIPT LOAD and two EVALSHA", n)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	resetStats(t, c)
	run("3")
	run("4")
	if n := calls(t, c, cmds...); n["script|load"] != 0 || n["evalsha"] != 2 || n["eval"] != 1 {
		t.Fatalf("two calls after SCRIPT FLUSH sent %v, want EVALSHA (NOSCRIPT), EVAL, EVALSHA", n)
	}
}

// On a pipeline, where SCRIPT LOAD's answer would come too late, a script
// whose SHA is unknown is queued as EVAL; Load on the client learns it,
// and the pipeline's next EvalSha is an EVALSHA.
func TestScriptPipelineLoad(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	s := newScript(echoSrc, false)
	pipe := func() {
		t.Helper()
		var cmd *redis.Cmd
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			cmd = s.EvalSha(ctx, p, []string{"k"}, "v")
			return nil
		})
		if v, err := cmd.StringSlice(); err != nil || !slices.Equal(v, []string{"k", "v"}) {
			t.Fatalf("EvalSha: %q, %v", v, err)
		}
	}
	resetStats(t, c)
	pipe()
	if s.sha.Load() != nil {
		t.Fatal("a pipeline learnt the SHA")
	}
	s.Load(ctx, c, "k")
	pipe()
	if n := calls(t, c, "script|load", "evalsha", "eval"); n["script|load"] != 1 || n["evalsha"] != 1 || n["eval"] != 1 {
		t.Fatalf("sent %v, want EVAL, SCRIPT LOAD, EVALSHA", n)
	}
}

// A user without +script|load is refused SCRIPT LOAD once: the script
// runs with EVAL, and asks no more, so that ACL LOG gets one entry, not
// one a call.
func TestScriptLoadRefused(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	srv.SetUser(t, "noload", "on", ">pw", "~*", "-@all", "+eval", "+evalsha", "+ping")
	o := srv.Options()
	o.Username, o.Password, o.DisableIdentity = "noload", "pw", true
	c := redis.NewClient(o)
	defer c.Close()
	ctx := context.Background()
	s := newScript(echoSrc, false)
	resetStats(t, admin)
	for i := range 3 {
		if v, err := s.Run(ctx, c, []string{"k"}, "v").StringSlice(); err != nil || len(v) != 2 {
			t.Fatalf("call %d: %q, %v", i, v, err)
		}
	}
	// ACL LOG counts repeated refusals in one entry.
	log, err := admin.ACLLog(ctx, 10).Result()
	if err != nil || len(log) != 1 || log[0].Object != "script|load" || log[0].Count != 1 {
		var got []string
		for _, e := range log {
			got = append(got, fmt.Sprintf("%s x%d", e.Object, e.Count))
		}
		t.Fatalf("ACL LOG %q (%v), want one script|load refusal", got, err)
	}
	if n := calls(t, admin, "eval", "evalsha"); n["eval"] != 3 || n["evalsha"] != 0 {
		t.Fatalf("three calls sent %v, want three EVAL", n)
	}
}

// forgetSHAs makes the package's scripts as FIPS mode builds them, with
// no SHA until a server tells them, until the test ends.
func forgetSHAs(t *testing.T) {
	scripts := []*Script{acquireScript, permitScript, renewScript, renewLeasesScript, reenterScript,
		availableScript, renewNodeScript, raiseScript}
	for _, p := range []*publishers{plainPublishers, shardedPublishers} {
		scripts = append(scripts, p.release, p.abandon, p.leave, p.downgrade)
	}
	for _, s := range scripts {
		sha := s.sha.Swap(nil)
		t.Cleanup(func() { s.sha.Store(sha) })
	}
}

// On a Cluster in FIPS mode, SCRIPT LOAD goes to one node, whose answer
// serves them all: each other node answers NOSCRIPT, EVAL leaves the
// script there, and from then on every node runs EVALSHA alone; a node
// whose scripts were flushed (a restart) answers NOSCRIPT once more. Each
// round acquires leases on every node, renews them (renew_node.lua, a
// call per node) and releases them (release.lua, pipelined).
func TestScriptSHAFromServerOnCluster(t *testing.T) {
	forgetSHAs(t)
	cl := redistest.NewCluster(t, 3, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	be := NewRedis(cl.Client(t), "p:")
	var nodes []*redis.Client
	for _, n := range cl.Nodes() {
		nodes = append(nodes, n.Client(t))
	}
	stats := func() []map[string]int {
		var out []map[string]int
		for i, c := range nodes {
			out = append(out, calls(t, c, "script|load", "evalsha", "eval"))
			t.Logf("node %d: %v", i, out[i])
			resetStats(t, c)
		}
		return out
	}
	stats()
	clusterRound(t, ctx, be, 1, true)
	loads := 0
	for _, n := range stats() {
		loads += n["script|load"]
	}
	if loads < 1 || loads > 3 {
		t.Errorf("%d SCRIPT LOADs, want one a script (acquire, renew_node, release)", loads)
	}
	clusterRound(t, ctx, be, 2, true)
	for i, n := range stats() {
		if n["script|load"] != 0 || n["eval"] != 0 || n["evalsha"] < 3 {
			t.Errorf("node %d ran %v once every node had the scripts, want EVALSHA alone", i, n)
		}
	}
	if err := nodes[1].ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	clusterRound(t, ctx, be, 3, false)
	for i, n := range stats() {
		want := 0
		if i == 1 {
			want = 2 // acquire.lua and renew_node.lua
		}
		if n["script|load"] != 0 || n["eval"] > want || n["evalsha"] < 2 {
			t.Errorf("node %d ran %v after node 1's SCRIPT FLUSH, want EVAL at most %d times", i, n, want)
		}
	}
}

// clusterRound acquires 12 names (tokens of the round) (on every node of a 3-primary Cluster)
// and renews them, and if release, releases them.
func clusterRound(t *testing.T, ctx context.Context, be *Redis, round int, release bool) {
	t.Helper()
	var items []Item
	for i := range 12 {
		req := Request{Name: "n" + strconv.Itoa(i), Token: "t" + strconv.Itoa(round) + "." + strconv.Itoa(i), TTL: time.Minute}
		if a, err := be.Acquire(ctx, req); err != nil || !a.Acquired {
			t.Fatalf("acquire %s: %+v, %v", req.Name, a, err)
		}
		items = append(items, req.Item())
	}
	errs := make([]error, len(items))
	check := func(what string) {
		t.Helper()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s %s: %v", what, items[i].Name, err)
			}
		}
	}
	be.Renew(ctx, items, errs)
	check("renew")
	if release {
		be.Release(ctx, items, errs)
		check("release")
	}
}
