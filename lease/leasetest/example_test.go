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

// A unit test of code that must stop when its server stops answering: the
// lease's context ends by its local deadline, before the server's TTL runs
// out, and a deferred Release gives up once the op timeout has passed, as
// a Redis client's read timeout would end it. Inside testing/synctest's
// bubble the same test takes no real time.
func ExampleServer_SetUnreachable() {
	srv := leasetest.NewServer()
	m, err := srv.NewManager(lease.WithTTL(300*time.Millisecond), lease.WithOpTimeout(100*time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer m.Close()

	l, err := m.Acquire(context.Background(), "nightly-report")
	if err != nil {
		panic(err)
	}
	srv.SetUnreachable(true) // as a network partition does
	<-l.Done()               // no renewal is answered
	fmt.Println("lost:", errors.Is(context.Cause(l.Context()), lease.ErrLost))

	err = l.Release(context.Background()) // returns after the op timeout
	fmt.Println("release says lost:", errors.Is(err, lease.ErrLost))
	// Output:
	// lost: true
	// release says lost: true
}
