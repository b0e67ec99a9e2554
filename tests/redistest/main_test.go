package redistest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine (a proxy pipe, a process
// waiter, a go-redis client) is still running after the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
