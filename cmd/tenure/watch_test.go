package main

// status --watch and elect --observe (watch.go).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/reentrant"
)

// lineWait bounds the wait for each line of a watch: generous, for two
// loaded cores.
const lineWait = 20 * time.Second

// watching is a started tenure whose stdout is read line by line.
type watching struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *bytes.Buffer
}

// startWatching starts c with its stdout read into lines. The pipe is the
// test's own, so that Wait does not close it under the reader.
func startWatching(t *testing.T, c *exec.Cmd) *watching {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	wt := &watching{cmd: c, lines: make(chan string, 100), stderr: &bytes.Buffer{}}
	c.Stdout, c.Stderr = w, wt.stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	go func() {
		defer r.Close()
		defer close(wt.lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			wt.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		if c.ProcessState == nil {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	})
	return wt
}

// next returns the next line, split into its time and the rest, checking
// that the time is a stamp of the watch's format.
func (wt *watching) next(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-wt.lines:
		if !ok {
			t.Fatalf("%v ended its output; stderr: %s", wt.cmd.Args, wt.stderr.String())
		}
		stamp, rest, _ := strings.Cut(line, " ")
		if _, err := time.Parse(stampFormat, stamp); err != nil {
			t.Fatalf("line %q does not start with a time: %v", line, err)
		}
		return rest
	case <-time.After(lineWait):
		t.Fatalf("%v printed no line within %v; stderr: %s", wt.cmd.Args, lineWait, wt.stderr.String())
		return ""
	}
}

// interrupt sends SIGINT and checks that the watch ends with status 0,
// having printed nothing more.
func (wt *watching) interrupt(t *testing.T) {
	t.Helper()
	if err := wt.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, wt.cmd, lineWait); code != 0 {
		t.Errorf("status %d after SIGINT, want 0; stderr: %s", code, wt.stderr.String())
	}
	for line := range wt.lines {
		t.Errorf("unexpected line %q", line)
	}
	if s := wt.stderr.String(); s != "" {
		t.Errorf("stderr: %s", s)
	}
}

// TestStatusWatch: status --watch prints each name's holder at once, then
// one line for each change of holder, in order, and ends with status 0 on
// SIGINT. Each change is held until its line is read, so no read can miss
// it.
func TestStatusWatch(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	m, err := lease.New(c, lease.WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	wt := startWatching(t, tenure("status", "--watch", "--interval", "50ms", "watch-a", "watch-b"))
	expect := func(want string) {
		t.Helper()
		if got := wt.next(t); got != want {
			t.Fatalf("line %q, want %q", got, want)
		}
	}
	expect("watch-a free")
	expect("watch-b free")

	l, err := m.Acquire(ctx, "watch-a")
	if err != nil {
		t.Fatal(err)
	}
	expect("watch-a lease, fence " + strconv.FormatInt(l.Fence(), 10))
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	expect("watch-a free")

	lk := reentrant.New(m)
	r, err := lk.Lock(reentrant.WithOwner(ctx, "job-7"), "watch-b")
	if err != nil {
		t.Fatal(err)
	}
	// Entering again changes the count, not the holder: no line.
	r2, err := lk.Lock(r.Context(), "watch-b")
	if err != nil {
		t.Fatal(err)
	}
	expect("watch-b reentrant lock, fence " + strconv.FormatInt(r.Fence(), 10) + ", owners job-7")
	if err := r2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	expect("watch-b free")
	wt.interrupt(t)
}

// TestStatusWatchJSON: with --json each line is a JSON object with the
// fields of status --json and the time.
func TestStatusWatchJSON(t *testing.T) {
	wt := startWatching(t, tenure("status", "--watch", "--json", "watch-json"))
	var line string
	select {
	case line = <-wt.lines:
	case <-time.After(lineWait):
		t.Fatalf("no line; stderr: %s", wt.stderr.String())
	}
	var got struct {
		Time time.Time `json:"time"`
		holding
	}
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	if got.Name != "watch-json" || got.Kind != "free" || got.Time.IsZero() {
		t.Errorf("line %q", line)
	}
	wt.interrupt(t)
}

// TestElectObserve: elect --observe prints the current leader (none), then
// each new leader with its term, and "no leader" when the leader resigns,
// without campaigning itself; SIGINT ends it with status 0.
func TestElectObserve(t *testing.T) {
	dir := t.TempDir()
	wt := startWatching(t, tenure("elect", "--observe", "observed"))
	expect := func(want string) {
		t.Helper()
		if got := wt.next(t); got != want {
			t.Fatalf("line %q, want %q", got, want)
		}
	}
	expect("observed no leader")

	// A candidate whose command prints its term and waits for the test's
	// word, then exits: tenure then resigns.
	lead := func(id string) {
		t.Helper()
		term, goOn := filepath.Join(dir, id+".term"), filepath.Join(dir, id+".go")
		cmd := tenure("elect", "--identity", id, "observed", "--", "sh", "-c",
			`echo $TENURE_FENCE > "$1"; while [ ! -e "$2" ]; do sleep 0.02; done`, "sh", term, goOn)
		startBackground(t, cmd)
		fence := waitFile(t, term, 1, lineWait)[0]
		expect("observed leader " + id + " (term " + fence + ")")
		if err := os.WriteFile(goOn, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if code := exitOf(t, cmd, lineWait); code != 0 {
			t.Fatalf("the leader %s exited %d", id, code)
		}
		expect("observed no leader")
	}
	lead("A")
	lead("B")
	wt.interrupt(t)
}
