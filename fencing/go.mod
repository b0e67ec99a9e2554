// Package fencing is a module of its own so that programs importing the
// library are not given its requirements (pgx, and for its tests SQLite and
// goleak; its package pgtest, the PostgreSQL test harness that its tests and
// the examples' use, talks through pgx). It has no replace directive, so that it can be fetched by
// version like cmd/tenure; until the first release the requirement of the
// library below is a placeholder that only the repository's go.work
// resolves (docs/releasing.md).

module github.com/tenure-go/tenure/fencing

go 1.26.0

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/tenure-go/tenure v0.0.0-00010101000000-000000000000
	go.uber.org/goleak v1.3.0
	modernc.org/sqlite v1.60.1
)

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/ncruces/go-strftime v1.1.0 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	modernc.org/libc v1.78.0 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
)
