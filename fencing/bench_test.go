package fencing_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/pgxfence"
)

// BenchmarkTx measures the guard's cost: the same transaction, one INSERT,
// run plain and guarded, on one connection, against the test PostgreSQL
// (through database/sql and through pgx) and a SQLite file. Compare plain
// and guarded of one run; the README of the package reports the ratio.
func BenchmarkTx(b *testing.B) {
	ctx := context.Background()
	h := holder{name: "bench", fence: 1}
	for _, be := range backends {
		b.Run(be.name+"/sql", func(b *testing.B) {
			db := be.open(b)
			db.SetMaxOpenConns(1)
			g := newGuard(b, fencing.WithDialect(be.dialect))
			if err := g.EnsureSchema(ctx, db); err != nil {
				b.Fatal(err)
			}
			createResults(b, db, be.dialect)
			insert := insertResult("bench")
			b.Run("plain", func(b *testing.B) {
				for b.Loop() {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						b.Fatal(err)
					}
					if err := insert(ctx, tx); err != nil {
						b.Fatal(err)
					}
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("guarded", func(b *testing.B) {
				for b.Loop() {
					if err := g.Tx(ctx, db, h, insert); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
	b.Run("postgres/pgx", func(b *testing.B) {
		conn := pgxConn(b)
		g := newGuard(b)
		if err := pgxfence.EnsureSchema(ctx, g, conn); err != nil {
			b.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "CREATE TABLE results (id bigserial PRIMARY KEY, writer text NOT NULL)"); err != nil {
			b.Fatal(err)
		}
		insert := func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO results (writer) VALUES ($1)", "bench")
			return err
		}
		b.Run("plain", func(b *testing.B) {
			for b.Loop() {
				if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return insert(ctx, tx) }); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("guarded", func(b *testing.B) {
			for b.Loop() {
				if err := pgxfence.Tx(ctx, g, conn, h, insert); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
