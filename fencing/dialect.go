package fencing

import (
	"fmt"
	"strings"
)

// A Dialect is the SQL of one database for the guard's table and its
// conditional upsert. Use Postgres or SQLite; the zero Dialect is invalid.
type Dialect struct {
	name   string
	upsert func(table string) string
	ddl    func(table string) string
}

// String returns the dialect's name.
func (d Dialect) String() string { return d.name }

var (
	// Postgres is PostgreSQL's dialect (9.5 or later, for ON CONFLICT;
	// tested on the server of Debian's postgresql package), through pgx or
	// any database/sql driver that takes $1 placeholders.
	Postgres = Dialect{
		name: "postgres",
		upsert: func(table string) string {
			// ON CONFLICT DO UPDATE locks the existing row even when its
			// WHERE is false, and in READ COMMITTED re-reads the row's
			// latest committed version after waiting for a concurrent
			// holder of the lock: the comparison is always against the
			// last committed fence.
			return "INSERT INTO " + table + " AS f (resource, fence) VALUES ($1, $2) " +
				"ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence WHERE f.fence <= EXCLUDED.fence"
		},
		ddl: func(table string) string {
			return "CREATE TABLE IF NOT EXISTS " + table + " (resource text PRIMARY KEY, fence bigint NOT NULL)"
		},
	}

	// SQLite is SQLite's dialect (3.24 or later, for upserts; tested with
	// the pure-Go modernc.org/sqlite). SQLite runs one writer at a time, so
	// a guarded transaction, which writes first, waits for the database's
	// write lock (set a busy timeout) rather than for a row lock.
	SQLite = Dialect{
		name: "sqlite",
		upsert: func(table string) string {
			return "INSERT INTO " + table + " (resource, fence) VALUES (?, ?) " +
				"ON CONFLICT (resource) DO UPDATE SET fence = excluded.fence WHERE " + lastPart(table) + ".fence <= excluded.fence"
		},
		ddl: func(table string) string {
			return "CREATE TABLE IF NOT EXISTS " + table + " (resource TEXT PRIMARY KEY NOT NULL, fence INTEGER NOT NULL)"
		},
	}
)

// lastPart returns the table's own quoted name, without its schema: SQLite
// names the target's columns by the table's name alone.
func lastPart(quoted string) string {
	if i := strings.LastIndex(quoted, `"."`); i >= 0 {
		return quoted[i+2:]
	}
	return quoted
}

// maxIdent is PostgreSQL's identifier length (NAMEDATALEN - 1); longer names
// are truncated silently there, so they are refused here.
const maxIdent = 63

// quoteTable validates a table name, optionally schema-qualified, and returns
// it with each part double-quoted. Only letters, digits and underscores are
// allowed in a part, so the quotes cannot be closed from inside.
func quoteTable(name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("%w: table name %q: at most schema.table", ErrInvalidOption, name)
	}
	quoted := make([]string, len(parts))
	for i, p := range parts {
		if !isIdent(p) {
			return "", fmt.Errorf("%w: table name %q: each part must be 1 to %d letters, digits or underscores, not starting with a digit", ErrInvalidOption, name, maxIdent)
		}
		quoted[i] = `"` + p + `"`
	}
	return strings.Join(quoted, "."), nil
}

func isIdent(s string) bool {
	if s == "" || len(s) > maxIdent {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
