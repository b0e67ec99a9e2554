package redistest_test

import (
	"testing"

	"github.com/tenure-go/tenure/internal/leaktest"
)

// TestMain fails the package if any goroutine (a proxy pipe, a process
// waiter, a go-redis client) is still running after the tests.
func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m)
}
