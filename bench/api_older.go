//go:build olderlib

package main

import "github.com/tenure-go/tenure/lease"

// noReleaseMemory stands in for lease.WithReleaseMemory(0) when
// before-after.sh builds this bench on a library older than the option:
// it only runs scenario 2, which does not use it.
func noReleaseMemory() []lease.Option { return nil }
