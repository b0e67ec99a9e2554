package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun runs the whole demo against the embedded Redis and checks the
// story it tells.
func TestRun(t *testing.T) {
	t.Setenv("REDIS_URL", "") // the embedded Redis, whatever the environment says
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out, logs bytes.Buffer
	err := run(ctx, &out, &logs)
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), logs.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, want := range []string{
		"started an embedded Redis",
		`acquired "nightly-report": fence `,
		"renewed: it moved",
		"an operator deleted tenure:{nightly-report} and another worker SET it to its own token",
		`context.Cause: "lease: lost" (errors.Is(cause, lease.ErrLost) = true)`,
		"stopping: lease lost, not writing partial results",
		"errors.Is ErrNotHeld = true",
		`tenure:{nightly-report} still holds "another-worker"`,
		"Do: task step 3/3 done",
		`Do returned nil: the task is done and the lease on "weekly-cleanup" released`,
		"nothing of ours is left held",
		"clean finish",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout does not mention %q", want)
		}
	}
	if strings.Contains(out.String(), "all 20 steps done") {
		t.Error("the job finished: the lease was never lost")
	}
	if !strings.Contains(logs.String(), `level=WARN msg="tenure: lease lost" name=nightly-report`) {
		t.Error("the library logged no lease-lost warning")
	}
}
