package main

// "tenure version" and --version.

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestVersion: "tenure --version" and "tenure version" print the same
// text, whose first line is "tenure VERSION" with the module version the
// go command stamped into the binary, and which names the commit (when the
// build recorded one) and the Go toolchain, as "go version -m" reads them
// from the binary.
func TestVersion(t *testing.T) {
	code, flag, stderr := result(t, tenure("--version"))
	if code != 0 || stderr != "" {
		t.Fatalf("--version: status %d, stderr %q", code, stderr)
	}
	code, sub, stderr := result(t, tenure("version"))
	if code != 0 || stderr != "" {
		t.Fatalf("version: status %d, stderr %q", code, stderr)
	}
	if flag != sub {
		t.Errorf("--version printed %q, version %q", flag, sub)
	}

	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	var goVersion, modVersion, revision string
	modified := false
	for i, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case i == 0 && len(f) == 2:
			goVersion = f[1] // "PATH: go1.x"
		case len(f) >= 3 && f[0] == "mod":
			modVersion = f[2]
		case len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision="):
			revision = strings.TrimPrefix(f[1], "vcs.revision=")
		case len(f) == 2 && f[0] == "build" && f[1] == "vcs.modified=true":
			modified = true
		}
	}
	if goVersion == "" || modVersion == "" {
		t.Fatalf("go version -m printed no Go or module version:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(flag), "\n")
	if want := "tenure " + modVersion; lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	if !strings.Contains(flag, goVersion) {
		t.Errorf("the version does not name Go %s:\n%s", goVersion, flag)
	}
	if revision != "" && !strings.Contains(flag, revision) {
		t.Errorf("the version does not name the revision %s:\n%s", revision, flag)
	}
	if revision == "" && !strings.Contains(flag, "unknown commit") {
		t.Errorf("the build recorded no revision, and the version does not say so:\n%s", flag)
	}
	if modified != strings.Contains(flag, "(modified)") {
		t.Errorf("vcs.modified is %v, but the version says:\n%s", modified, flag)
	}
	t.Logf("tenure --version:\n%s", flag)
}

// TestVersionWithoutVCS: a binary built with -buildvcs=false says what it
// knows (the module version, Go) and that its commit is unknown; it
// printed "tenure (devel)" and Go alone, which read as a commit forgotten.
func TestVersionWithoutVCS(t *testing.T) {
	novcs := filepath.Join(t.TempDir(), "tenure")
	if out, err := exec.Command("go", "build", "-buildvcs=false", "-o", novcs, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -buildvcs=false: %v\n%s", err, out)
	}
	out, err := exec.Command(novcs, "--version").Output()
	if err != nil {
		t.Fatalf("--version: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if !strings.HasPrefix(lines[0], "tenure ") || !strings.Contains(string(out), "unknown commit") ||
		!strings.Contains(string(out), runtime.Version()) {
		t.Errorf("--version of a build without VCS information:\n%s", out)
	}
}
