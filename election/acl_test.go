package election_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/refusal"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

func aclManager(t *testing.T, c redis.UniversalClient) *lease.Manager {
	t.Helper()
	m, err := lease.New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// A campaign, a term (the record written and refreshed by its script), an
// observer, Leader and Resign, as a user with docs/security.md's rule: the
// server refuses nothing, and no script touches a key it was not given.
func TestACLUserEveryFeature(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := redistest.Start(t)
	c := s.UserClient(t, lease.DefaultKeyPrefix)
	mon := s.Monitor(t)

	e, err := election.New(election.Config{Manager: aclManager(t, c), Client: c, Name: "acl-e", Identity: "a", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	observer, err := election.New(election.Config{Client: c, Name: "acl-e"})
	if err != nil {
		t.Fatal(err)
	}
	octx, ostop := context.WithCancel(ctx)
	seen := observer.Observe(octx)
	leading := make(chan struct{})
	ran := make(chan error, 1)
	go func() {
		ran <- e.Run(ctx, election.Callbacks{OnStartedLeading: func(lctx context.Context) {
			close(leading)
			<-lctx.Done()
		}})
	}()
	<-leading
	for rec := range seen {
		if rec.Identity == "a" {
			break
		}
	}
	ostop()
	for range seen {
	}
	if rec, err := observer.Leader(ctx); err != nil || rec.Identity != "a" {
		t.Fatalf("Leader: %v, %v", rec, err)
	}
	time.Sleep(time.Second / 2) // a refresh of the record (every TTL/3)
	if err := e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	s.CheckUserRun(t, mon, lease.DefaultKeyPrefix)
}

// A refusal reaches the caller: Leader's read, and Run, which returns it
// instead of retrying.
func TestPermissionErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := redistest.Start(t)
	admin := s.Client(t)
	c := s.UserClient(t, lease.DefaultKeyPrefix)
	if err := admin.Do(ctx, "acl", "setuser", "tenure", "-multi", "-evalsha", "-eval").Err(); err != nil {
		t.Fatal(err)
	}
	e, err := election.New(election.Config{Manager: aclManager(t, c), Client: c, Name: "acl-p", Identity: "a", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var re redis.Error
	if _, err := e.Leader(ctx); !errors.As(err, &re) || !strings.HasPrefix(re.Error(), "NOPERM") {
		t.Errorf("Leader without MULTI: %v", err)
	}
	err = e.Run(ctx, election.Callbacks{OnStartedLeading: func(context.Context) {}})
	if !errors.As(err, &re) || !strings.HasPrefix(re.Error(), "NOPERM") {
		t.Errorf("Run without EVALSHA: %v", err)
	}
	// Leading needs the record script's HSET: the term cannot begin, and
	// Run says why.
	if err := admin.Do(ctx, "acl", "setuser", "tenure", "+evalsha", "+eval", "-hset").Err(); err != nil {
		t.Fatal(err)
	}
	err = e.Run(ctx, election.Callbacks{OnStartedLeading: func(context.Context) { t.Error("led without writing the record") }})
	if refusal.Of(err) != refusal.Script { // worded differently from Redis 7.2 on
		t.Errorf("Run without HSET: %v", err)
	}
}
