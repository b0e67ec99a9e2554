package main

// The demo's scenery: the servers, the manager and the tables it runs on,
// the workers' computation, and the row read back at the end. main.go is
// what the demo is about.

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-go/tenure/examples/internal/examplecmd"
	"github.com/tenure-go/tenure/examples/internal/exampleredis"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/pgxfence"
	"github.com/tenure-go/tenure/lease"
)

// setting is what the workers share: the database, Redis and a manager.
type setting struct {
	conn   *pgx.Conn
	r      *exampleredis.Redis
	m      *lease.Manager
	guard  *fencing.Guard // PostgreSQL, table tenure_fences
	suffix string         // for names on a shared Redis
	runID  string         // this run's rows in fencedjob_totals
}

// setUp connects to PostgreSQL and Redis, saying which, makes the lease
// manager and the guard, and creates the tables if they do not exist.
func setUp(ctx context.Context, dbURL string, say examplecmd.Say, logOut io.Writer) (_ *setting, err error) {
	st := &setting{runID: strings.ToLower(rand.Text()[:8])}
	defer func() {
		if err != nil {
			st.close()
		}
	}()
	if st.conn, err = pgx.Connect(ctx, dbURL); err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	say("postgres: connected to %s (server %s)", st.conn.Config().Host, st.conn.PgConn().ParameterStatus("server_version"))
	if st.r, err = exampleredis.Connect(ctx, say); err != nil {
		return nil, err
	}
	st.suffix = st.r.Suffix
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if st.m, err = lease.New(st.r.NewClient(), lease.WithTTL(ttl), lease.WithLogger(logger)); err != nil {
		return nil, err
	}
	if st.guard, err = fencing.New(); err != nil {
		return nil, err
	}
	if err := pgxfence.EnsureSchema(ctx, st.guard, st.conn); err != nil {
		return nil, err
	}
	if _, err := st.conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS fencedjob_totals (
		run text NOT NULL, day text NOT NULL, total bigint NOT NULL, writer text NOT NULL, fence bigint NOT NULL,
		PRIMARY KEY (run, day))`); err != nil {
		return nil, err
	}
	say("guard: fences recorded in tenure_fences; results go to fencedjob_totals (run %s)", st.runID)
	return st, nil
}

// close closes what setUp opened, the manager first.
func (st *setting) close() {
	if st.m != nil {
		_ = st.m.Close()
	}
	if st.r != nil {
		st.r.Close()
	}
	if st.conn != nil {
		_ = st.conn.Close(context.Background())
	}
}

// writtenBy reads this run's row back and says who wrote it, which must be
// want.
func (st *setting) writtenBy(ctx context.Context, want string, say examplecmd.Say) error {
	var writer string
	var total, fence int64
	if err := st.conn.QueryRow(ctx, "SELECT writer, total, fence FROM fencedjob_totals WHERE run = $1", st.runID).Scan(&writer, &total, &fence); err != nil {
		return err
	}
	say("fencedjob_totals for run %s: total %d written by worker %s under fence %d", st.runID, total, writer, fence)
	if writer != want {
		return fmt.Errorf("the row was written by %s", writer)
	}
	return nil
}

// compute is the long job: a few steps, with a result that depends on the
// worker so that an overwrite would show.
func compute(ctx context.Context, who string, say examplecmd.Say) int64 {
	var total int64
	for i := 1; i <= steps; i++ {
		if examplecmd.Work(ctx, 50*time.Millisecond) != nil {
			return total
		}
		total += int64(i * 100)
	}
	if who == "A" {
		total++ // A read the day's data before B: its total differs
	}
	say("worker %s: computed total %d", who, total)
	return total
}

// heldView is a lease as its holder sees it right after a pause of its whole
// process, before its watchdog has run: the name and fence, still held.
type heldView struct {
	name  string
	fence int64
}

func (h heldView) Name() string             { return h.name }
func (h heldView) Fence() int64             { return h.fence }
func (h heldView) Err() error               { return nil }
func (h heldView) Context() context.Context { return context.Background() }
