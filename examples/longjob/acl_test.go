package main

import (
	"testing"

	"github.com/tenure-go/tenure/examples/internal/acltest"
)

// TestRunAsACLUser runs the demo's whole flow through REDIS_URL on a real
// redis-server as docs/security.md's least-privilege user.
func TestRunAsACLUser(t *testing.T) {
	acltest.Run(t, run, "clean finish")
}
