//go:build chaos

package chaos

import (
	"strings"
	"testing"
)

// RunChecked runs the runner with the -chaos.* flags (README.md) and fails
// t on any violation, or when the run exercised too little to mean
// anything. It is TestChaos, here and at the old path internal/chaos.
func RunChecked(t *testing.T) {
	cfg := FlagConfig()
	out := Run(t, cfg)
	if n := out.Report.Violations(); n > 0 {
		t.Fatalf("%d violations (seed %d)", n, cfg.seed)
	}
	rep := out.Report
	if out.Acquired < 100 || rep.SectionsByEnd[EndLost] == 0 || len(out.History.Faults) < 5 {
		t.Fatalf("the run exercised too little: %d acquisitions, %d losses, %d faults", out.Acquired, rep.SectionsByEnd[EndLost], len(out.History.Faults))
	}
	if strings.Contains(cfg.kinds, "permit") && rep.PeakShared["sem0"] < semN {
		t.Fatalf("the semaphore never had its %d permits held at once (at most %d)", semN, rep.PeakShared["sem0"])
	}
	if strings.Contains(cfg.kinds, "rw") && (rep.PeakShared["rw0"] < 2 || rep.SectionsByKind[KindWrite] == 0) {
		t.Fatalf("the read-write lock saw at most %d readers at once and %d writers", rep.PeakShared["rw0"], rep.SectionsByKind[KindWrite])
	}
}
