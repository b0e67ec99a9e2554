// Package chaos is the old path of the chaos runner, which moved to
// tests/chaos so that internal/ holds only the engine (docs/design.md
// section 7). Its one test, built with -tags chaos, runs tests/chaos's
// TestChaos, so that `go test -tags chaos ./internal/chaos -chaos.*` runs
// the same chaos run as before.
//
// Deprecated: run go test -tags chaos ./tests/chaos (tests/chaos/README.md).
package chaos
