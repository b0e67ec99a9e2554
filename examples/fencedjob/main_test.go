package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/fencing/pgtest"
)

func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// TestRun runs the demo against the test harness's PostgreSQL and the
// embedded Redis, and checks the story it tells and the row it leaves.
func TestRun(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	url := pgtest.Shared(t).NewDatabase(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for i := range 2 { // a second run on the same database finds its tables
		var out, logs bytes.Buffer
		err := run(ctx, url, &out, &logs)
		t.Logf("run %d stdout:\n%s\nstderr:\n%s", i, out.String(), logs.String())
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		for _, want := range []string{
			"worker B: committed total 600 under fence",
			"worker A: turned down by the database: fencing: stale fence",
			"errors.Is(err, lease.ErrLost) = true",
			"errors.Is ErrEnded = true",
			"total 600 written by worker B",
			"done: B's results are intact",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("stdout does not mention %q", want)
			}
		}
	}
}

// TestNoDatabase: without DATABASE_URL the demo says how to get one.
func TestNoDatabase(t *testing.T) {
	var out bytes.Buffer
	err := run(t.Context(), "", &out, &out)
	if !errors.Is(err, errNoDatabase) || !strings.Contains(err.Error(), "apt-get install postgresql") || !strings.Contains(err.Error(), "docker run") {
		t.Fatalf("run without a database: %v", err)
	}
}
