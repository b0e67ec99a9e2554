package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/redistest"
)

// TestRunAsACLUser runs the demo's whole flow on a real redis-server as
// docs/security.md's least-privilege user: it must finish as it does on the
// embedded Redis, and the server must refuse it nothing (its ACL LOG).
func TestRunAsACLUser(t *testing.T) {
	srv := redistest.Start(t)
	u := srv.CreateUser(t, "tenure", "tenure:")
	t.Setenv("REDIS_URL", fmt.Sprintf("redis://%s:%s@%s/0", u.Name, u.Password, srv.Addr()))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out, logs bytes.Buffer
	err := run(ctx, &out, &logs)
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), logs.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(out.String(), "clean finish") {
		t.Error("the demo did not finish cleanly")
	}
	if log := srv.ACLLog(t); len(log) != 0 {
		t.Errorf("the server refused the demo: %q", log)
	}
}
