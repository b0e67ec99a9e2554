// The tenure command is a module of its own so that programs importing the
// library are not given its requirements (cobra). It has no replace
// directive: `go install github.com/tenure-go/tenure/cmd/tenure@VERSION`
// refuses a module that has one. Until the first release the requirement of
// the library below is a placeholder that only the repository's go.work
// resolves; docs/releasing.md tells how a release sets it.

module github.com/tenure-go/tenure/cmd/tenure

go 1.26.0

require (
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/spf13/cobra v1.10.2
	github.com/tenure-go/tenure v0.0.0-00010101000000-000000000000
	golang.org/x/sys v0.48.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
)
