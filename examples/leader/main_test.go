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
		`observer: "scheduler" has no leader`,
		" leads: term ",
		`observer: "scheduler" is led by worker-`,
		"scheduling under term",
		"its manager is closed, without resigning",
		"lease: manager closed",
		"(a release message woke it)",
		"is cut off from Redis",
		"lease: lost",
		"never two leaders",
		"resigns",
		"election: resigned",
		"Run returned nil after Resign",
		"clean finish",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout does not mention %q", want)
		}
	}
	if n := strings.Count(out.String(), " leads: term "); n != 3 {
		t.Errorf("%d terms, want 3", n)
	}
	// At the end, after the last resignation, the observer reports no
	// leader. Whether it also saw none at the start depends on which of
	// it and the first candidate the scheduler ran first (a loaded machine
	// had a leader before the observer's first look).
	resigns := strings.Index(out.String(), " resigns\n")
	if i := strings.LastIndex(out.String(), `has no leader`); resigns < 0 || i < resigns {
		t.Errorf("the observer did not report that nobody leads after the last resignation")
	}
}
