package inspect_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/inspect"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/reentrant"
	"github.com/tenure-go/tenure/semaphore"
	"github.com/tenure-go/tenure/tests/redistest"
)

var redisAddr string

func TestMain(m *testing.M) { redistest.Main(m, func(addr string) { redisAddr = addr }) }

func manager(t *testing.T, c redis.UniversalClient, opts ...lease.Option) *lease.Manager {
	t.Helper()
	m, err := lease.New(c, append([]lease.Option{lease.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// Every kind of holder reads back as what holds it, with its holder
// identity, metadata, fence and TTL; no token is ever shown.
func TestRead(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := manager(t, srv.Client(t), lease.WithHolder("host/1"))
	ctx := context.Background()
	l, err := m.Acquire(ctx, "job", lease.WithMetadata("run 7"))
	if err != nil {
		t.Fatal(err)
	}
	lk, err := reentrant.New(m).Lock(ctx, "re")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	sem := semaphore.New(m)
	var fences []int64
	for range 2 {
		p, err := sem.Acquire(ctx, "sem", 3, lease.WithMetadata("builder"))
		if err != nil {
			t.Fatal(err)
		}
		fences = append(fences, p.Fence())
	}
	e, err := election.New(election.Config{Manager: m, Client: srv.Client(t), Name: "cron", Identity: "leader-a"})
	if err != nil {
		t.Fatal(err)
	}
	leading, stop := make(chan int64), make(chan struct{})
	go func() {
		_ = e.Run(ctx, election.Callbacks{OnStartedLeading: func(ctx context.Context) {
			rec, _ := election.Leading(ctx)
			leading <- rec.Fence
			<-stop
			_ = e.Resign(ctx)
		}})
	}()
	term := <-leading
	defer close(stop)
	raw.RPush(ctx, "tenure:{odd}", "x")

	hs, err := inspect.Read(ctx, srv.Client(t), "", "job", "re", "sem", "cron", "free", "odd")
	if err != nil {
		t.Fatal(err)
	}
	job, re, sm, cron, free, odd := hs[0], hs[1], hs[2], hs[3], hs[4], hs[5]
	if job.Kind != inspect.Lease || job.Holder != "host/1" || job.Metadata != "run 7" || job.Fence != l.Fence() || job.TTL <= 0 {
		t.Errorf("lease: %+v (fence %d)", job, l.Fence())
	}
	if re.Kind != inspect.Reentrant || len(re.Owners) != 1 || re.Fence != lk.Fence() {
		t.Errorf("reentrant: %+v", re)
	}
	if sm.Kind != inspect.Permits || sm.N != 3 || len(sm.Permits) != 2 || sm.Permits[0].Fence != fences[0] ||
		sm.Permits[1].Fence != fences[1] || sm.Permits[0].Holder != "host/1" || sm.Permits[0].Metadata != "builder" || sm.Permits[0].TTL <= 0 {
		t.Errorf("permits: %+v (fences %v)", sm, fences)
	}
	if cron.Leader == nil || cron.Leader.Identity != "leader-a" || cron.Leader.Fence != term {
		t.Errorf("election: %+v (term %d)", cron, term)
	}
	if free.Kind != inspect.Free || free.TTL != 0 || odd.Kind != "list" {
		t.Errorf("free %+v, odd %+v", free, odd)
	}
	if printed := fmt.Sprintf("%+v %#v", hs, hs); strings.Contains(printed, l.Token()) || strings.Contains(printed, raw.Get(ctx, "tenure:{job}").Val()) {
		t.Errorf("a token shows in %s", printed)
	}
}

// Same tells the same hold from another without showing a token.
func TestSame(t *testing.T) {
	srv := redistest.Start(t)
	m := manager(t, srv.Client(t))
	ctx := context.Background()
	read := func() inspect.Holding {
		t.Helper()
		hs, err := inspect.Read(ctx, srv.Client(t), "", "job")
		if err != nil {
			t.Fatal(err)
		}
		return hs[0]
	}
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	a, b := read(), read()
	if !a.Same(b) {
		t.Fatal("two reads of one lease differ")
	}
	_ = l.Release(ctx)
	if _, err := m.Acquire(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	if c := read(); a.Same(c) {
		t.Fatal("another lease on the name reads as the same hold")
	}
}

// Names finds every held name matching a pattern, by SCAN, under a prefix
// that holds glob characters, and on a Cluster across every primary.
func TestNames(t *testing.T) {
	check := func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		m := manager(t, c, lease.WithKeyPrefix("t*[x]:"))
		other := manager(t, c) // the default prefix: never listed
		var want []string
		for i := range 12 {
			n := fmt.Sprintf("job-%02d", i)
			if _, err := m.Acquire(ctx, n, lease.WithTTL(time.Minute)); err != nil {
				t.Fatal(err)
			}
			want = append(want, n)
		}
		if _, err := m.Acquire(ctx, "other"); err != nil {
			t.Fatal(err)
		}
		if _, err := other.Acquire(ctx, "job-99"); err != nil {
			t.Fatal(err)
		}
		got, err := inspect.Names(ctx, c, "t*[x]:", "job-*")
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("Names = %v, want %v", got, want)
		}
	}
	t.Run("server", func(t *testing.T) { check(t, redistest.Start(t).Client(t)) })
	t.Run("cluster", func(t *testing.T) { check(t, redistest.NewCluster(t, 3, 0).Client(t)) })
}

// A hold of k permits (semaphore.Permits.AcquireN) reads as one Permit
// with Count k, beside single permits; Held counts them all.
func TestReadKPermits(t *testing.T) {
	srv := redistest.Start(t)
	m := manager(t, srv.Client(t), lease.WithHolder("h"))
	ctx := context.Background()
	sem := semaphore.New(m)
	three, err := sem.AcquireN(ctx, "pool", 5, 3)
	if err != nil {
		t.Fatal(err)
	}
	one, err := sem.Acquire(ctx, "pool", 5)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := inspect.Read(ctx, srv.Client(t), "", "pool")
	if err != nil {
		t.Fatal(err)
	}
	h := hs[0]
	if len(h.Permits) != 2 || h.Held() != 4 || h.Permits[0].Fence != three.Fence() || h.Permits[0].Count != 3 ||
		h.Permits[1].Fence != one.Fence() || h.Permits[1].Count != 1 || h.N != 5 {
		t.Fatalf("holding %+v, Held %d (fences %d, %d)", h, h.Held(), three.Fence(), one.Fence())
	}
}

// A revocation marker ("tenure release --force", internal/keys) reads as
// Revoked, with what it revoked, who has yet to confirm, and its TTL; the
// tokens in it are never shown.
func TestReadRevoked(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	ctx := context.Background()
	raw.Set(ctx, "tenure:{gone}", "tenure-revoked\nstring\n0123abcd.host/9\x1ejob 7", time.Minute)
	raw.Set(ctx, "tenure:{sem}", "tenure-revoked\nzset\naa.b/1\nbb.b/2", time.Minute)
	hs, err := inspect.Read(ctx, raw, "", "gone", "sem")
	if err != nil {
		t.Fatal(err)
	}
	g, s := hs[0], hs[1]
	if g.Kind != inspect.Revoked || g.Revoked != inspect.Lease || g.Holder != "host/9" || g.Metadata != "job 7" ||
		len(g.Unconfirmed) != 1 || g.Unconfirmed[0] != "host/9" || g.TTL <= 0 || g.TTL > time.Minute {
		t.Errorf("a revoked lease: %+v", g)
	}
	if s.Kind != inspect.Revoked || s.Revoked != inspect.Permits || fmt.Sprint(s.Unconfirmed) != "[b/1 b/2]" || s.Holder != "" {
		t.Errorf("revoked permits: %+v", s)
	}
	if strings.Contains(fmt.Sprintf("%+v", hs), "0123abcd") {
		t.Errorf("a token shows: %+v", hs)
	}
}
