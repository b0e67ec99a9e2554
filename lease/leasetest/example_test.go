package leasetest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
)

// A unit test of code that must stop when its lease is lost: the lease is
// taken away on demand, and the code sees its context end with ErrLost.
func Example() {
	srv := leasetest.NewServer()
	m, err := srv.NewManager(lease.WithTTL(300 * time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer m.Close()

	err = m.Do(context.Background(), "nightly-report", func(ctx context.Context) error {
		srv.Delete("nightly-report") // as if an operator forced it free
		<-ctx.Done()                 // the next renewal finds it gone
		return context.Cause(ctx)
	})
	fmt.Println("lost:", errors.Is(err, lease.ErrLost))
	// Output:
	// lost: true
}
