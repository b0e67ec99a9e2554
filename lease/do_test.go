package lease_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/tests/redistest"
)

func TestDoReleasesAndReportsLoss(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t), lease.WithTTL(time.Second), lease.WithRenewInterval(100*time.Millisecond))
	ctx := context.Background()

	boom := errors.New("boom")
	err := m.Do(ctx, "job", func(ctx context.Context) error {
		if raw.Exists(ctx, "tenure:{job}").Val() != 1 {
			t.Error("fn ran without the lease")
		}
		return boom
	})
	if err != boom {
		t.Fatalf("Do = %v, want fn's error", err)
	}
	if raw.Exists(ctx, "tenure:{job}").Val() != 0 {
		t.Fatal("Do left the lease behind")
	}

	err = m.Do(ctx, "job", func(ctx context.Context) error {
		raw.Set(ctx, "tenure:{job}", "intruder", time.Minute)
		<-ctx.Done()
		if context.Cause(ctx) != lease.ErrLost {
			t.Errorf("fn's cause %v", context.Cause(ctx))
		}
		return nil
	})
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Do after loss = %v", err)
	}
	if raw.Get(ctx, "tenure:{job}").Val() != "intruder" {
		t.Fatal("Do released another holder's lease")
	}

	cctx, cancel := context.WithCancel(ctx)
	err = m.Do(cctx, "other", func(ctx context.Context) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, lease.ErrLost) {
		t.Fatalf("Do with cancelled ctx = %v", err)
	}
	if raw.Exists(ctx, "tenure:{other}").Val() != 0 {
		t.Fatal("Do did not release after its ctx was cancelled")
	}
}

func TestDoReleasesOnPanic(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t))
	func() {
		defer func() { _ = recover() }()
		_ = m.Do(context.Background(), "job", func(context.Context) error { panic("boom") })
	}()
	if raw.Exists(context.Background(), "tenure:{job}").Val() != 0 {
		t.Fatal("a panicking fn left its lease behind")
	}
}

// TestDoCauseSaidOnce: fn that returns context.Cause(ctx) after a loss gets
// an error that says the loss once, naming the lease. It said "lease: lost
// (and the lease on "job" ended before it returned: lease: lost)".
func TestDoCauseSaidOnce(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t), lease.WithTTL(time.Second), lease.WithRenewInterval(100*time.Millisecond))
	ctx := context.Background()
	err := m.Do(ctx, "job", func(ctx context.Context) error {
		raw.Set(ctx, "tenure:{job}", "intruder", time.Minute)
		<-ctx.Done()
		return context.Cause(ctx)
	})
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Do after loss = %v", err)
	}
	if msg := err.Error(); strings.Count(msg, "lost") != 1 || !strings.Contains(msg, `"job"`) {
		t.Errorf("Do's error says the loss %d times, or not which lease: %q", strings.Count(msg, "lost"), msg)
	}
	wrapped := errors.New("query")
	err = m.Do(ctx, "job2", func(ctx context.Context) error {
		raw.Set(ctx, "tenure:{job2}", "intruder", time.Minute)
		<-ctx.Done()
		return errors.Join(wrapped, context.Cause(ctx))
	})
	if !errors.Is(err, lease.ErrLost) || !errors.Is(err, wrapped) || strings.Count(err.Error(), "lost") != 1 {
		t.Errorf("Do with fn wrapping the cause = %q", err)
	}
}

// TestDoFenceFromContext: as Do's documentation says, fn's context carries
// the lease, whose fence is the one the name's counter holds.
func TestDoFenceFromContext(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	m := newManager(t, srv.Client(t))
	ctx := context.Background()
	err := m.Do(ctx, "fenced", func(ctx context.Context) error {
		l, ok := lease.FromContext(ctx)
		if !ok || l.Name() != "fenced" {
			t.Fatalf("fn's context carries no lease on %q: %v %v", "fenced", l, ok)
		}
		if got := raw.Get(ctx, "tenure:{fenced}:fence").Val(); got != strconv.FormatInt(l.Fence(), 10) {
			t.Errorf("the fence from the context is %d, the counter %s", l.Fence(), got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDoDocSaysFence: Do's godoc says how fn gets the fence (it said
// nothing; only FromContext's did).
func TestDoDocSaysFence(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "manager.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "Do" && fd.Recv != nil {
			if doc := fd.Doc.Text(); !strings.Contains(doc, "lease.FromContext(ctx)") || !strings.Contains(doc, "l.Fence()") {
				t.Errorf("Do's godoc does not say how fn gets the fence:\n%s", doc)
			}
			return
		}
	}
	t.Fatal("no Manager.Do in manager.go")
}
