package main

// "tenure elect": one leader at a time, the hand-over on resignation, and
// a loss.

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestElect: of two "tenure elect", the first runs its command; when it
// ends (a signal), the first resigns and the other takes over, before the
// first's TTL could have freed the name; when the second loses the lease,
// its command is stopped and it exits 77.
func TestElect(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "terms")
	script := `echo "$TENURE_IDENTITY $TENURE_FENCE" >> "$1"; trap "exit 0" TERM; while :; do sleep 0.05; done`
	start := func(id, ttl string) *exec.Cmd {
		cmd := tenure("elect", "--ttl", ttl, "--identity", id, "sched", "--", "sh", "-c", script, "sh", file)
		startBackground(t, cmd)
		return cmd
	}
	// A leads first, with a TTL long enough that only its resignation can
	// hand over within the test's waits; B's short TTL makes its loss
	// quick to detect.
	a := start("A", "60s")
	first := strings.Fields(waitFile(t, file, 1, 10*time.Second)[0])
	if first[0] != "A" {
		t.Fatalf("first term %v, want A's", first)
	}
	b := start("B", "1s")
	code, out, _ := result(t, tenure("status", "--json", "sched"))
	var h holding
	if err := json.Unmarshal([]byte(out), &h); code != 0 || err != nil || h.Leader == nil || h.Leader.Identity != first[0] ||
		strconv.FormatInt(h.Leader.Fence, 10) != first[1] {
		t.Fatalf("status of the election: %d %v %s", code, err, out)
	}
	_ = a.Process.Signal(syscall.SIGTERM)
	if code := exitOf(t, a, 20*time.Second); code != 0 {
		t.Errorf("the first leader exited %d, want its command's 0", code)
	}
	second := strings.Fields(waitFile(t, file, 2, 20*time.Second)[1])
	if second[0] != "B" || second[1] <= first[1] {
		t.Errorf("second term %v after %v", second, first)
	}
	if err := c.Del(ctx, "tenure:{sched}").Err(); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, b, 20*time.Second); code != exitLost {
		t.Errorf("the second leader exited %d after losing the lease, want %d", code, exitLost)
	}
}
