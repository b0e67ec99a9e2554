package backend_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/watchdog"
)

// BenchmarkRenewerBatch is one batch of the watchdog's renewals through the
// adapter, over the in-memory fake: what the adapter adds to every round.
func BenchmarkRenewerBatch(b *testing.B) {
	fake := backend.NewFake()
	ctx := context.Background()
	batch := make([]watchdog.Renewal[backend.Item], 1000)
	for i := range batch {
		it := backend.Item{Name: fmt.Sprint("n", i), Token: "t"}
		fake.Set(it.Name, it.Token, time.Hour)
		batch[i] = watchdog.Renewal[backend.Item]{Item: it, TTL: time.Hour}
	}
	errs := make([]error, len(batch))
	r := backend.Renewer(fake)
	b.ReportAllocs()
	for b.Loop() {
		r.Renew(ctx, batch, errs)
	}
}
