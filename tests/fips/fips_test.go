// Package fips_test checks that every package of the library starts in
// FIPS 140-only mode: none hashes a script with SHA-1 (go-redis's
// redis.NewScript does) while the program starts. A package that did would
// panic before main in any program that imports it, whatever it uses.
package fips_test

import (
	"os"
	"os/exec"
	"testing"

	_ "github.com/tenure-go/tenure/election"
	_ "github.com/tenure-go/tenure/inspect"
	_ "github.com/tenure-go/tenure/lease"
	_ "github.com/tenure-go/tenure/lease/leasetest"
	_ "github.com/tenure-go/tenure/redisson"
	_ "github.com/tenure-go/tenure/reentrant"
	_ "github.com/tenure-go/tenure/rwlock"
	_ "github.com/tenure-go/tenure/semaphore"
	_ "github.com/tenure-go/tenure/tracing"
	_ "github.com/tenure-go/tenure/watchdog"
)

// child is set in the copy of this test binary run in FIPS 140-only mode:
// that it got as far as running a test is the check.
const child = "TENURE_FIPS_CHILD"

func TestEveryPackageStartsInFIPS140OnlyMode(t *testing.T) {
	if os.Getenv(child) == "1" {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEveryPackageStartsInFIPS140OnlyMode$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GODEBUG=fips140=only", child+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the library's packages, started under GODEBUG=fips140=only: %v\n%s", err, out)
	}
}
