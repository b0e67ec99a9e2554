package pgtest

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// execTimeout bounds one Exec: connection, startup and the statements.
const execTimeout = 10 * time.Second

// Exec runs query (one or more statements, no parameters) on database db as
// the superuser, through pgx's pgconn and the simple query protocol, and
// returns the first error: a failed connection or a statement the server
// refused, whose text names its SQLSTATE (a *pgconn.PgError, or a
// *pgconn.ConnectError wrapping one).
func (s *Server) Exec(db, query string) error {
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	defer cancel()
	conn, err := pgconn.Connect(ctx, s.URL(db))
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer func() { _ = conn.Close(ctx) }() // the statements' outcome is what counts
	if _, err := conn.Exec(ctx, query).ReadAll(); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return nil
}
