package main

// "tenure run -n" (permits of a semaphore): at most N at once, what status
// and list show of permits and read locks, a lost permit, and a mismatched N.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/rwlock"
)

// permitCmd records "start FENCE" in $1, waits for the file $2-FENCE, and
// records "end FENCE": the test decides when each run ends, so the order
// of the records, not their times, says how many ran at once.
const permitCmd = `echo "start $TENURE_FENCE" >> "$1"; while [ ! -e "$2-$TENURE_FENCE" ]; do sleep 0.02; done; echo "end $TENURE_FENCE" >> "$1"`

// starts returns the fences of the runs that started, in order.
func starts(lines []string) []string {
	var out []string
	for _, l := range lines {
		if f, ok := strings.CutPrefix(l, "start "); ok {
			out = append(out, f)
		}
	}
	return out
}

// TestRunPermits: four "tenure run -n 2" on one name. Two run their command
// at once and the others wait; status and list show the two permits with
// their fences and holders, and that none of 2 is free; each run ended lets
// one waiter in; release --force takes the last two permits, whose commands
// are stopped (status 77). Never more than two commands ran at once, by the
// order of their records.
func TestRunPermits(t *testing.T) {
	c := client(t)
	const name = "sem-runs"
	key := "tenure:{" + name + "}"
	dir := t.TempDir()
	log, gate := filepath.Join(dir, "log"), filepath.Join(dir, "go")
	var runs []*exec.Cmd
	var stderrs []*bytes.Buffer
	for i := range 4 {
		cmd := tenure("run", "-n", "2", "--ttl", "2s", "--holder", fmt.Sprintf("sem-%d", i), name, "--", "sh", "-c", permitCmd, "sh", log, gate)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		startBackground(t, cmd)
		runs, stderrs = append(runs, cmd), append(stderrs, &stderr)
	}
	first := starts(waitFile(t, log, 2, 30*time.Second))
	if len(first) != 2 {
		t.Fatalf("%d commands started at once under -n 2: %v", len(first), first)
	}

	h, out := waitForWaiters(t, name)
	checkPermitsJSON(t, h, out, first)
	checkPermitsText(t, c, name, key)
	// The two waiting runs are still waiting, after all that.
	if now := starts(waitFile(t, log, 2, time.Second)); len(now) != 2 {
		t.Fatalf("%d commands started under -n 2 while two held permits: %v", len(now), now)
	}

	// Each run let go lets one waiter in.
	for i, f := range first {
		if err := os.WriteFile(gate+"-"+f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		waitFile(t, log, 2+2*(i+1), 30*time.Second)
	}
	all := starts(waitFile(t, log, 6, time.Second))
	if len(all) != 4 {
		t.Fatalf("starts %v, want four", all)
	}

	releasePermitRuns(t, c, name, key, runs, stderrs)
	checkAtMostTwo(t, log)
}

// TestPermitLossStopsCommand: the permit removed from the set (ZREM) while
// its command runs: a renewal finds it gone, the command is stopped and
// tenure exits 77, saying that the permit was removed. The other permit's
// command runs on.
func TestPermitLossStopsCommand(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	const name = "sem-loss"
	key := "tenure:{" + name + "}"
	t.Cleanup(func() { c.Del(ctx, key, key+":permits") })
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	loop := `echo up >> "$1"; trap 'exit 0' TERM; while :; do sleep 0.05; done`
	victim := tenure("run", "-n", "2", "--ttl", "1s", "--holder", "victim", name, "--", "sh", "-c", loop, "sh", ready)
	var stderr bytes.Buffer
	victim.Stderr = &stderr
	startBackground(t, victim)
	waitFile(t, ready, 1, 30*time.Second)
	other := tenure("run", "-n", "2", "--ttl", "1s", "--holder", "other", name, "--", "sh", "-c", loop, "sh", ready)
	startBackground(t, other)
	waitFile(t, ready, 2, 30*time.Second)

	var token string
	for _, tok := range c.ZRange(ctx, key, 0, -1).Val() {
		if lease.HolderOf(tok) == "victim" {
			token = tok
		}
	}
	if token == "" {
		t.Fatalf("no permit of holder victim in %v", c.ZRange(ctx, key, 0, -1).Val())
	}
	if err := c.ZRem(ctx, key, token).Err(); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, victim, 30*time.Second); code != exitLost {
		t.Errorf("status %d after the permit's removal, want %d; stderr: %s", code, exitLost, stderr.String())
	}
	for _, want := range []string{
		fmt.Sprintf(`the permit of %q was lost: its permit was removed from the semaphore`, name),
		"; sent SIGTERM to the command",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	// The other permit is untouched: its command still runs.
	if other.ProcessState != nil {
		t.Fatalf("the other permit's run ended: %v", other.ProcessState)
	}
	code, out, _ := result(t, tenure("status", "--json", name))
	var h holding
	if err := json.Unmarshal([]byte(out), &h); code != 0 || err != nil || h.Held != 1 || h.Permits[0].Holder != "other" {
		t.Errorf("status after the loss: %d %v %s", code, err, out)
	}
	_ = other.Process.Signal(syscall.SIGTERM)
	if code := exitOf(t, other, 30*time.Second); code != 0 {
		t.Errorf("the other run exited %d, want its command's 0", code)
	}
}

// TestStatusReadWriteLock: readers of a read-write lock show as permits
// (the server cannot tell them from a semaphore's), its writer as a lease;
// -n below 1 is a usage error.
func TestStatusReadWriteLock(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	m, err := lease.New(c, lease.WithLogger(quietLogger()), lease.WithTTL(5*time.Second), lease.WithHolder("rw-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	locks := rwlock.New(m)
	const name = "rw-status"
	r1, err := locks.RLock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := locks.RLock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ := result(t, tenure("status", name))
	if code != 0 || !strings.Contains(out, "permits (semaphore or read lock)") || !strings.Contains(out, "2 held of no limit") ||
		strings.Count(out, "holder rw-test") != 2 || !strings.Contains(out, "\nn        unlimited (a read lock's readers)\n") {
		t.Errorf("status of two readers: %d\n%s", code, out)
	}
	// --json keeps the number: rwlock's N for its readers.
	code, out, _ = result(t, tenure("status", "--json", name))
	var h holding
	if err := json.Unmarshal([]byte(out), &h); code != 0 || err != nil || h.N != readLockN {
		t.Errorf("status --json of two readers: %d %v\n%s", code, err, out)
	}
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	w, err := locks.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release(ctx)
	code, out, _ = result(t, tenure("status", "-n", "3", name))
	if code != 0 || !strings.Contains(out, "kind     lease") || !strings.Contains(out, "holder   rw-test") ||
		!strings.Contains(out, "0 of -n 3 free") {
		t.Errorf("status of the writer: %d\n%s", code, out)
	}
	for _, args := range [][]string{{"status", "-n", "0", name}, {"run", "-n", "0", name, "--", "true"}, {"run", "-n", "-1", name, "--", "true"}} {
		if code, _, stderr := result(t, tenure(args...)); code != exitUsage || !strings.Contains(stderr, "at least 1 permit") {
			t.Errorf("%v: status %d, want %d: %s", args, code, exitUsage, stderr)
		}
	}
}

// TestRunPermitsMismatch: two "tenure run -n 2" hold permits; "tenure run
// -n 3" (waiting forever by default) fails at once with status 76, naming
// both numbers; with --resize it runs beside the two, and then -n 2 is the
// one refused; status shows the stored n; --resize without -n is a usage
// error; once every permit is released a new -n is taken as it comes.
func TestRunPermitsMismatch(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	const name = "sem-mismatch"
	key := "tenure:{" + name + "}"
	t.Cleanup(func() { c.Del(ctx, key, key+":permits") })
	dir := t.TempDir()
	log, gate := filepath.Join(dir, "log"), filepath.Join(dir, "go")
	var runs []*exec.Cmd
	for i := range 2 {
		cmd := tenure("run", "-n", "2", "--holder", fmt.Sprintf("two-%d", i), name, "--", "sh", "-c", permitCmd, "sh", log, gate)
		startBackground(t, cmd)
		runs = append(runs, cmd)
	}
	fences := starts(waitFile(t, log, 2, 30*time.Second))

	code, _, stderr := result(t, tenure("run", "-n", "3", name, "--", "true"))
	if code != exitLimit || strings.Count(stderr, "\n") != 1 ||
		!strings.Contains(stderr, `semaphore "sem-mismatch" has n=2 while its permits are held; this request asked n=3`) ||
		!strings.Contains(stderr, "--resize") {
		t.Errorf("run -n 3 beside two of -n 2: status %d, want %d; stderr: %q", code, exitLimit, stderr)
	}
	code, _, stderr = result(t, tenure("run", "--resize", name, "--", "true"))
	if code != exitUsage || !strings.Contains(stderr, "--resize is for -n N") {
		t.Errorf("--resize without -n: status %d, want %d; stderr: %q", code, exitUsage, stderr)
	}
	code, _, stderr = result(t, tenure("run", "-n", "3", "--resize", "--wait", "0", name, "--", "true"))
	if code != 0 {
		t.Errorf("run -n 3 --resize beside two of -n 2: status %d, want 0; stderr: %q", code, stderr)
	}
	// (Its permit is released; the two -n 2 runs still hold theirs.)
	code, _, stderr = result(t, tenure("run", "-n", "2", "--wait", "0", name, "--", "true"))
	if code != exitLimit || !strings.Contains(stderr, "has n=3 while its permits are held; this request asked n=2") {
		t.Errorf("run -n 2 after the resize to 3: status %d, want %d; stderr: %q", code, exitLimit, stderr)
	}
	code, out, _ := result(t, tenure("status", "--json", name))
	var h holding
	if err := json.Unmarshal([]byte(out), &h); code != 0 || err != nil || h.Held != 2 || h.N != 3 {
		t.Errorf("status --json after the resize: %d %v %s", code, err, out)
	}
	code, out, _ = result(t, tenure("status", name))
	if code != 0 || !strings.Contains(out, "permits  2 held of n=3") || !strings.Contains(out, "\nn        3\n") {
		t.Errorf("status after the resize: %d\n%s", code, out)
	}

	endMismatchRuns(t, c, name, key, gate, fences, runs)
}

// waitForWaiters waits until status says that two runs of name wait (they
// wait in the name's fair queue), and returns what status --json -n 2 said
// then, read and as printed.
func waitForWaiters(t *testing.T, name string) (holding, string) {
	// The two runs that wait are counted: they wait in the name's fair
	// queue (status showed "waiting 0" while they barged unseen).
	var (
		h                 holding
		code              int
		out, stderr, text string
	)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, out, stderr = result(t, tenure("status", "--json", "-n", "2", name))
		if err := json.Unmarshal([]byte(out), &h); code != 0 || err != nil {
			t.Fatalf("status --json -n 2: %d %v %s %s", code, err, out, stderr)
		}
		_, text, _ = result(t, tenure("status", name))
		if h.Waiting == 2 && strings.Contains(text, "\nwaiting  2\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("two runs wait, and status says:\n%s\n%s", out, text)
		}
	}
	return h, out
}

// checkPermitsJSON checks what status --json -n 2 said (h, printed as out)
// of the two permits held, whose fences are first.
func checkPermitsJSON(t *testing.T, h holding, out string, first []string) {
	var fences, holders []string
	for _, p := range h.Permits {
		fences = append(fences, strconv.FormatInt(p.Fence, 10))
		holders = append(holders, p.Holder)
		if p.TTLms <= 0 || p.TTLms > 2000 {
			t.Errorf("permit %+v: TTL outside (0, 2s]", p)
		}
	}
	slices.Sort(fences)
	if h.Kind != "permits" || h.Held != 2 || h.N != 2 || h.Limit != 2 || h.Free == nil || *h.Free != 0 ||
		!slices.Equal(fences, slices.Sorted(slices.Values(first))) {
		t.Errorf("status --json -n 2 of the two permits started as %v:\n%s", first, out)
	}
	for _, who := range holders {
		if !strings.HasPrefix(who, "sem-") {
			t.Errorf("a permit's holder is %q, want a --holder sem-i", who)
		}
	}
	if fence, _ := strconv.ParseInt(first[1], 10, 64); h.Fence < fence {
		t.Errorf("the name's fence %d is below a permit's %d", h.Fence, fence)
	}
}

// checkPermitsText checks status, status -n 5, list and list --json of
// name, the semaphore whose key is key, while two permits are held.
func checkPermitsText(t *testing.T, c *redis.Client, name, key string) {
	ctx := context.Background()
	code, out, _ := result(t, tenure("status", name))
	if code != 0 || !strings.Contains(out, "kind     permits (semaphore or read lock)") ||
		!strings.Contains(out, "permits  2 held of n=2") || !strings.Contains(out, "\nn        2\n") ||
		strings.Count(out, "\npermit   fence ") != 2 || !strings.Contains(out, ", holder sem-") {
		t.Errorf("status of the permits: %d\n%s", code, out)
	}
	code, out, _ = result(t, tenure("status", "-n", "5", name))
	if code != 0 || !strings.Contains(out, "permits  2 held, 3 of -n 5 free") {
		t.Errorf("status -n 5: %d\n%s", code, out)
	}
	code, out, _ = result(t, tenure("list", "sem-*"))
	if code != 0 || !strings.Contains(out, name+"  permits") || !strings.Contains(out, "2 permits: sem-") {
		t.Errorf("list of the permits: %d\n%s", code, out)
	}
	code, out, _ = result(t, tenure("list", "--json", "sem-*"))
	var hs []holding
	if err := json.Unmarshal([]byte(out), &hs); code != 0 || err != nil || len(hs) != 1 || hs[0].Held != 2 || len(hs[0].Permits) != 2 {
		t.Errorf("list --json: %d %v\n%s", code, err, out)
	}
	for _, tok := range c.ZRange(ctx, key, 0, -1).Val() {
		if strings.Contains(out, tok[:32]) {
			t.Error("list shows a permit's token")
		}
	}
}

// releasePermitRuns takes the two permits of name left with release
// --force, and checks the runs' exits: two ran to their end, two lost their
// permits.
func releasePermitRuns(t *testing.T, c *redis.Client, name, key string, runs []*exec.Cmd, stderrs []*bytes.Buffer) {
	ctx := context.Background()
	// release --force --now takes both remaining permits at once.
	code, out, stderr := result(t, tenure("release", "--force", "--now", name))
	if code != 0 || !strings.Contains(out, fmt.Sprintf("removed the 2 permits of %q", name)) || !strings.Contains(out, "held by sem-") {
		t.Errorf("release --force of the permits: %d %q %s", code, out, stderr)
	}
	if n := c.Exists(ctx, key, key+":permits").Val(); n != 0 {
		t.Errorf("release --force left %d of the set and its :permits hash", n)
	}
	var codes []int
	for i, r := range runs {
		code := exitOf(t, r, 30*time.Second)
		codes = append(codes, code)
		if code == exitLost && !strings.Contains(stderrs[i].String(), fmt.Sprintf("the permit of %q was lost", name)) {
			t.Errorf("run %d: %s", i, stderrs[i].String())
		}
	}
	slices.Sort(codes)
	if !slices.Equal(codes, []int{0, 0, exitLost, exitLost}) {
		t.Errorf("exit statuses %v, want two 0 (ran to their end) and two %d (permits taken by release --force)", codes, exitLost)
	}
}

// checkAtMostTwo checks, by the order of the records in log, that never
// more than two commands ran at once.
func checkAtMostTwo(t *testing.T, log string) {
	// Never more than two at once, by the order of the records.
	data, _ := os.ReadFile(log)
	running, most := 0, 0
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		switch {
		case strings.HasPrefix(l, "start "):
			running++
		case strings.HasPrefix(l, "end "):
			running--
		}
		most = max(most, running)
	}
	if most != 2 {
		t.Errorf("at most %d commands ran at once, want 2:\n%s", most, data)
	}
}

// endMismatchRuns lets the runs of name (gate's files, for their fences)
// end, then checks that, no permit held, a new -n is taken as it comes and
// the semaphore (key) leaves no key behind.
func endMismatchRuns(t *testing.T, c *redis.Client, name, key, gate string, fences []string, runs []*exec.Cmd) {
	ctx := context.Background()
	for _, f := range fences {
		if err := os.WriteFile(gate+"-"+f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range runs {
		if code := exitOf(t, r, 30*time.Second); code != 0 {
			t.Errorf("run %d of -n 2 exited %d, want its command's 0", i, code)
		}
	}
	code, _, stderr := result(t, tenure("run", "-n", "1", "--wait", "0", name, "--", "true"))
	if code != 0 {
		t.Errorf("run -n 1 once no permit is held: status %d, want 0; stderr: %q", code, stderr)
	}
	if n := c.Exists(ctx, key, key+":permits").Val(); n != 0 {
		t.Errorf("%d keys of the semaphore left after its last permit", n)
	}
}
