package main

import (
	"context"
	"io"
	"testing"

	"github.com/tenure-go/tenure/examples/internal/acltest"
	"github.com/tenure-go/tenure/fencing/pgtest"
)

// TestRunAsACLUser runs the demo through REDIS_URL on a real redis-server
// as docs/security.md's least-privilege user, and on the harness's
// PostgreSQL.
func TestRunAsACLUser(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	acltest.Run(t, func(ctx context.Context, out, logs io.Writer) error {
		return run(ctx, url, out, logs)
	}, "done: B's results are intact")
}
