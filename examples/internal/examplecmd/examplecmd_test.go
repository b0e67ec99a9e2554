package examplecmd

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestNarrator checks the stamp's format at both resolutions the examples
// use, which must print as they did before the narrator was shared.
func TestNarrator(t *testing.T) {
	for _, tc := range []struct {
		resolution time.Duration
		line       string
	}{
		{10 * time.Millisecond, `^ \d\.\d\ds  step 1 of "job"\n$`},
		{time.Millisecond, `^ \d\.\d\d\ds  step 1 of "job"\n$`},
	} {
		var out bytes.Buffer
		Narrator(&out, time.Now(), tc.resolution)("step %d of %q", 1, "job")
		if !regexp.MustCompile(tc.line).MatchString(out.String()) {
			t.Errorf("resolution %v: %q does not match %s", tc.resolution, out.String(), tc.line)
		}
	}
}

// TestNarratorConcurrent: lines said at once come out whole, one a line.
func TestNarratorConcurrent(t *testing.T) {
	var out bytes.Buffer
	say := Narrator(&out, time.Now(), 10*time.Millisecond)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 50 {
				say("worker %d says %s", i, strings.Repeat("x", 40))
			}
		})
	}
	wg.Wait()
	line := regexp.MustCompile(`^ \d\.\d\ds  worker \d says x{40}$`)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 8*50 {
		t.Fatalf("%d lines, want %d", len(lines), 8*50)
	}
	for _, l := range lines {
		if !line.MatchString(l) {
			t.Fatalf("a torn line: %q", l)
		}
	}
}

// TestWork: a step ends by itself, or early with its context's cause.
func TestWork(t *testing.T) {
	if err := Work(t.Context(), time.Millisecond); err != nil {
		t.Errorf("a finished step: %v", err)
	}
	cause := errors.New("lease lost")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(cause)
	if err := Work(ctx, time.Hour); !errors.Is(err, cause) {
		t.Errorf("an interrupted step: %v, want its context's cause", err)
	}
}
