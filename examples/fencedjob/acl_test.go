package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/pgtest"
	"github.com/tenure-go/tenure/internal/redistest"
)

// TestRunAsACLUser runs the demo on a real redis-server as docs/security.md's
// least-privilege user (and the harness's PostgreSQL): it must tell the same
// ending, and the server must refuse it nothing (its ACL LOG).
func TestRunAsACLUser(t *testing.T) {
	srv := redistest.Start(t)
	u := srv.CreateUser(t, "tenure", "tenure:")
	t.Setenv("REDIS_URL", fmt.Sprintf("redis://%s:%s@%s/0", u.Name, u.Password, srv.Addr()))
	url := pgtest.Shared(t).NewDatabase(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out, logs bytes.Buffer
	err := run(ctx, url, &out, &logs)
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), logs.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(out.String(), "done: B's results are intact") {
		t.Error("the demo did not reach its end")
	}
	if log := srv.ACLLog(t); len(log) != 0 {
		t.Errorf("the server refused the demo: %q", log)
	}
}
