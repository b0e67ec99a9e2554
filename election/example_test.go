package election_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

// redisAddr is the server the example uses; the test binary points it at a
// redis-server of its own.
var redisAddr = "localhost:6379"

func Example() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	m, err := lease.New(client)
	if err != nil {
		panic(err)
	}
	defer m.Close()

	e, err := election.New(election.Config{Manager: m, Name: "example-scheduler", Identity: "worker-1"})
	if err != nil {
		panic(err)
	}
	err = e.Run(context.Background(), election.Callbacks{
		OnStartedLeading: func(ctx context.Context) {
			rec, _ := election.Leading(ctx)
			fmt.Println("leading as", rec.Identity, "with a fence:", rec.Fence > 0)
			// Lead until ctx is cancelled; here, hand over at once.
			_ = e.Resign(ctx)
		},
		OnStoppedLeading: func() { fmt.Println("stopped leading") },
	})
	fmt.Println("Run returned", err)
	// Output:
	// leading as worker-1 with a fence: true
	// stopped leading
	// Run returned <nil>
}

// A liveness probe for a process that campaigns: it fails once a term
// outlives its end by more than the tolerance because OnStartedLeading
// ignores its context, so that the orchestrator restarts the process.
func ExampleElection_HealthHandler() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer client.Close()
	m, err := lease.New(client)
	if err != nil {
		panic(err)
	}
	defer m.Close()
	e, err := election.New(election.Config{Manager: m, Name: "example-health", Identity: "worker-1"})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz", e.HealthHandler(10*time.Second))

	_ = e.Run(context.Background(), election.Callbacks{
		OnStartedLeading: func(ctx context.Context) {
			fmt.Println("leader:", e.IsLeader())
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
			fmt.Print("probe: ", rec.Code, " ", rec.Body.String())
			_ = e.Resign(ctx)
		},
	})
	fmt.Println("leader after resigning:", e.IsLeader())
	// Output:
	// leader: true
	// probe: 200 ok
	// leader after resigning: false
}
