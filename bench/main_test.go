package main

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if one leaves a goroutine behind (the
// layout prototype's test talks to a redis-server through go-redis).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestWriteReportMakesDir: a scenario run alone (-renew-floor, -layout,
// -three-servers, -scale) with -out DIR makes DIR, as a full run does; it
// measured, then failed to write its report.
func TestWriteReportMakesDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not", "yet")
	if err := writeReport(dir, "renewfloor.md", "# report\n"); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "renewfloor.md")); err != nil || string(data) != "# report\n" {
		t.Errorf("the report: %q, %v", data, err)
	}
}
