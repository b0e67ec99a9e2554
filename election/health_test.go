package election_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

// probe returns the health handler's status code and body.
func probe(h http.Handler) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	return rec.Code, rec.Body.String()
}

// IsLeader is this process's view, without a round trip: true inside the
// term, false for a follower and once the term's context ended. Check (and
// its handler) fails only when a term outlives its end by more than the
// tolerance because OnStartedLeading ignores its context: after Resign,
// and after the lease is lost.
func TestLeaderHealth(t *testing.T) {
	for _, how := range []string{"resigned", "lost"} {
		t.Run(how, func(t *testing.T) {
			srv := redistest.Start(t)
			raw := srv.Client(t)
			name := "health-" + how
			a := newCandidate(t, srv.Client(t), name, "a", time.Second)
			b := newCandidate(t, srv.Client(t), name, "b", time.Second)
			started, unblock := make(chan struct{}), make(chan struct{})
			var inside bool
			done := make(chan error, 1)
			go func() {
				done <- a.e.Run(context.Background(), election.Callbacks{
					OnStartedLeading: func(ctx context.Context) {
						inside = a.e.IsLeader()
						close(started)
						<-unblock // a callback that ignores its context
					},
				})
			}()
			<-started
			b.run(t)
			h := a.e.HealthHandler(200 * time.Millisecond)
			if !inside || !a.e.IsLeader() {
				t.Fatalf("IsLeader inside the term: %v, then %v; want true", inside, a.e.IsLeader())
			}
			if b.e.IsLeader() {
				t.Fatal("the follower says it leads")
			}
			if code, body := probe(h); code != http.StatusOK || body != "ok\n" {
				t.Fatalf("a healthy leader's probe: %d %q", code, body)
			}

			switch how {
			case "resigned":
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				_ = a.e.Resign(ctx) // cannot finish: the callback does not return
				cancel()
			case "lost":
				raw.Del(context.Background(), "tenure:{"+name+"}")
			}
			var err error
			for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				if err = a.e.Check(200 * time.Millisecond); err != nil {
					break
				}
			}
			if !errors.Is(err, election.ErrStuck) {
				t.Fatalf("Check of a term whose callback ignores its end: %v, want ErrStuck", err)
			}
			if a.e.IsLeader() {
				t.Error("IsLeader after the term's context ended")
			}
			if code, body := probe(h); code != http.StatusServiceUnavailable || !strings.Contains(body, "stuck") {
				t.Errorf("a stuck leader's probe: %d %q", code, body)
			}
			if how == "lost" && !strings.Contains(err.Error(), lease.ErrLost.Error()) {
				t.Errorf("Check's error %q does not name the cause", err)
			}

			close(unblock)
			if how == "resigned" {
				if err := <-done; err != nil {
					t.Fatalf("Run after Resign: %v", err)
				}
			} else {
				_ = a.m.Close()
				<-done
			}
			if err := a.e.Check(0); err != nil {
				t.Errorf("Check after the term ended: %v", err)
			}
			if code, _ := probe(h); code != http.StatusOK {
				t.Errorf("probe after the term ended: %d", code)
			}
		})
	}
}
