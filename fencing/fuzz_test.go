package fencing_test

import (
	"context"
	"database/sql"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/tenure-go/tenure/fencing"
)

var quotedTable = regexp.MustCompile(`^"[A-Za-z_][A-Za-z0-9_]{0,62}"(\."[A-Za-z_][A-Za-z0-9_]{0,62}")?$`)

// FuzzWithTable: a table name is either refused with ErrInvalidOption or
// written into the SQL as one or two quoted plain identifiers, and then
// creates exactly that table, never anything else.
func FuzzWithTable(f *testing.F) {
	for _, s := range []string{"tenure_fences", "jobs.fences", `a"; DROP TABLE x; --`, `a"."b`, "a..b", "", "_", "A1", "1a", "ü", "a\x00b", "main.t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		g, err := fencing.New(fencing.WithDialect(fencing.SQLite), fencing.WithTable(name))
		if err != nil {
			if !errors.Is(err, fencing.ErrInvalidOption) {
				t.Fatalf("WithTable(%q): %v, not ErrInvalidOption", name, err)
			}
			return
		}
		if strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") != "" {
			t.Fatalf("WithTable(%q) accepted a character outside letters, digits, _ and .", name)
		}
		ddl := g.DDL()
		table := strings.TrimSuffix(strings.TrimPrefix(ddl, "CREATE TABLE IF NOT EXISTS "), " (resource TEXT PRIMARY KEY NOT NULL, fence INTEGER NOT NULL)")
		if !quotedTable.MatchString(table) {
			t.Fatalf("WithTable(%q) wrote the table as %q", name, table)
		}
		if strings.Contains(name, ".") && !strings.HasPrefix(name, "main.") {
			return // another schema: SQLite has none attached
		}
		db, err := sql.Open("sqlite", ":memory:")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1) // one in-memory database
		ctx := context.Background()
		if err := g.EnsureSchema(ctx, db); err != nil {
			t.Fatalf("EnsureSchema with %q: %v", name, err)
		}
		var tables []string
		rows, err := db.Query("SELECT name FROM sqlite_master WHERE type = 'table'")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			tables = append(tables, n)
		}
		rows.Close()
		want := name[strings.LastIndex(name, ".")+1:]
		if len(tables) != 1 || tables[0] != want {
			t.Fatalf("WithTable(%q) created tables %q, want just %q", name, tables, want)
		}
		if err := g.Tx(ctx, db, holder{name: "r", fence: 1}, func(context.Context, *sql.Tx) error { return nil }); err != nil {
			t.Fatalf("Tx on table %q: %v", name, err)
		}
	})
}
