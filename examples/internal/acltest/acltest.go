// Package acltest runs an example's whole flow on a real redis-server as
// docs/security.md's least-privilege user, for the examples' tests.
package acltest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/tests/redistest"
)

// Run starts a redis-server with a user made by docs/security.md's rule for
// the default prefix, points REDIS_URL at it as that user, and runs the
// example's run function: it must return nil and print ending, and the
// server's ACL LOG must stay empty (nothing refused, not even what go-redis
// ignores).
func Run(t *testing.T, run func(ctx context.Context, out, logs io.Writer) error, ending string) {
	t.Helper()
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
	if !strings.Contains(out.String(), ending) {
		t.Errorf("the demo did not reach its end (%q)", ending)
	}
	if log := srv.ACLLog(t); len(log) != 0 {
		t.Errorf("the server refused the demo: %q", log)
	}
}
