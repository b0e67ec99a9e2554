package backend_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure/internal/backend"
)

// A hung server's calls end as a client's would: at the client's timeout
// (WithTimeout) when the context would end later or never, with an error
// wrapping os.ErrDeadlineExceeded whose outcome is unknown; at the
// context's end when that comes first or at the same instant (the
// context's error, not chance); and with no timeout, at the context's end
// alone. Clients of one Fake share its leases.
func TestFakeHangEndsAtClientTimeout(t *testing.T) {
	const d = 5 * time.Second
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		ctx     time.Duration // 0: a context that never ends
		took    time.Duration
		want    error
	}{
		{"no deadline", d, 0, d, backend.ErrFakeTimeout},
		{"later deadline", d, 2 * d, d, backend.ErrFakeTimeout},
		{"same deadline", d, d, d, context.DeadlineExceeded},
		{"earlier deadline", d, d / 5, d / 5, context.DeadlineExceeded},
		{"no client timeout", 0, 2 * d, 2 * d, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := backend.NewFake()
				client := fake.WithTimeout(tc.timeout)
				if _, err := client.Acquire(context.Background(), backend.Request{Name: "job", Token: "a", TTL: time.Hour}); err != nil {
					t.Fatal(err)
				}
				if tok, _, _ := fake.Holder("job"); tok != "a" {
					t.Fatal("the clients do not share the server")
				}
				ctx := context.Background()
				if tc.ctx > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.ctx)
					defer cancel()
				}
				fake.SetHang(true)
				start := time.Now()
				err := backend.ReleaseOne(ctx, client, backend.Item{Name: "job", Token: "a", TTL: time.Hour})
				if took := time.Since(start); took != tc.took || !errors.Is(err, tc.want) {
					t.Fatalf("after %v: %v; want %v after %v", took, err, tc.want, tc.took)
				}
				if tc.want == backend.ErrFakeTimeout && (!errors.Is(err, os.ErrDeadlineExceeded) || !backend.MaybeApplied(err)) {
					t.Fatalf("%v: want os.ErrDeadlineExceeded, maybe applied", err)
				}
				if tok, _, _ := fake.Holder("job"); tok != "a" {
					t.Fatal("a hung server applied the release")
				}
			})
		})
	}
}
