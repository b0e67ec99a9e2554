//go:build chaos

package fencing_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/pgtest"
	"github.com/tenure-go/tenure/tests/chaos"
)

// pgResource is the chaos runner's fenced resource as a real PostgreSQL
// behind the guard: each write is a guarded transaction that inserts the
// fence into a log table, whose serial id orders the writes the database
// took (the guard's upsert locks the resource's row first, so the inserts
// of one name take their ids in the order they commit).
type pgResource struct {
	g  *fencing.Guard
	db *sql.DB
}

// believer is a holder that believes it holds name with fence, as a holder
// stalled past its lease does until its process runs again: the guard's
// early refusal of an ended lease does not help it, the database must.
type believer struct {
	name  string
	fence int64
}

func (b believer) Name() string             { return b.name }
func (b believer) Fence() int64             { return b.fence }
func (b believer) Err() error               { return nil }
func (b believer) Context() context.Context { return context.Background() }

func (p *pgResource) Write(ctx context.Context, name string, fence int64) (int64, error) {
	var seq int64
	err := p.g.Tx(ctx, p.db, believer{name, fence}, func(ctx context.Context, tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO chaos_writes (name, fence) VALUES ($1, $2) RETURNING id`, name, fence).Scan(&seq)
	})
	if errors.Is(err, fencing.ErrStale) {
		return 0, chaos.ErrRefused
	}
	return seq, err
}

// TestChaosPostgres is the chaos run (tests/chaos, the -chaos.* flags)
// with the holders writing through the guard to a real PostgreSQL: the
// checker must find no stale write the database took, and the database's
// own log of the writes it took must show the fences of each name never
// going down.
//
// Stalled holders are what write stale fences, so a run meant to test the
// guard stalls often, as CI runs it:
//
//	go test -race -tags chaos -run TestChaosPostgres ./fencing -chaos.duration=30s \
//	    -chaos.kinds=lease -chaos.faults=pause,restart,blackhole,gcstall -v
func TestChaosPostgres(t *testing.T) {
	srv := pgtest.Shared(t)
	db, err := sql.Open("pgx", srv.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	g, err := fencing.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := g.EnsureSchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE chaos_writes (id bigserial PRIMARY KEY, name text NOT NULL, fence bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}

	cfg := chaos.FlagConfig().WithResource(&pgResource{g: g, db: db})
	out := chaos.Run(t, cfg)
	rep := out.Report
	if n := rep.Violations(); n > 0 {
		t.Fatalf("%d violations", n)
	}
	if rep.Writes < 100 || rep.Stalled < 5 || rep.Refused == 0 {
		t.Fatalf("%d holders stalled, the database took %d writes and refused %d: the run did not test the guard (stall more: see the comment above)",
			rep.Stalled, rep.Writes, rep.Refused)
	}

	rows, err := db.QueryContext(ctx, `SELECT id, name, fence FROM chaos_writes ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	top := map[string]int64{}
	n := 0
	for rows.Next() {
		var (
			id, fence int64
			name      string
		)
		if err := rows.Scan(&id, &name, &fence); err != nil {
			t.Fatal(err)
		}
		n++
		if fence < top[name] {
			t.Errorf("the database took fence %d for %q (write %d) after fence %d", fence, name, id, top[name])
		}
		top[name] = max(top[name], fence)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != rep.Writes {
		t.Errorf("the database logged %d writes, the runner recorded %d taken", n, rep.Writes)
	}
	t.Logf("PostgreSQL took %d guarded writes and refused %d as stale", n, rep.Refused)
}
