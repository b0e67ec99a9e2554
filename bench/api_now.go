//go:build !olderlib

package main

import "github.com/tenure-go/tenure/lease"

// noReleaseMemory is lease.WithReleaseMemory(0), which scenarios 6 and 9
// measure. before-after.sh builds this bench on an older library too, one
// without the option, with the tag olderlib (api_older.go).
func noReleaseMemory() []lease.Option { return []lease.Option{lease.WithReleaseMemory(0)} }
