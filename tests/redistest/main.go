package redistest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Main runs a package's tests (call it from TestMain) with a redis-server
// of the test binary's own, whose address it passes to use first (runnable
// examples need one: they cannot start their own). After tests that pass it
// checks that no goroutine was left behind. It does not return.
func Main(m *testing.M, use func(addr string)) {
	srv, err := StartServer(Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	use(srv.Addr())
	code := m.Run()
	_ = srv.Stop()
	if code == 0 {
		if err := Leaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Leaks reports the goroutines still running besides the test's own, as
// goleak.Find does, but gives them up to 3 seconds to end first: go-redis
// retries a failed dial from a goroutine that sleeps a second between
// attempts and notices its client was closed only when it wakes.
func Leaks() error {
	var err error
	for range 30 {
		if err = goleak.Find(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}
