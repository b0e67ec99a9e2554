package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/tests/redistest"
)

// The demo runs to its end in FIPS 140-only mode, against a redis-server
// (REDIS_URL: the embedded miniredis computes SHA1s itself, which that
// mode forbids), as docs/security.md's least-privilege user, refused
// nothing: the rule allows the SCRIPT LOAD that tells it the SHAs. It is built and run as a program of its own, since
// GODEBUG=fips140=only must be set before a program starts. Before the
// library took its scripts' SHAs from the server, it panicked before main
// ("crypto/sha1: use of SHA-1 is not allowed in FIPS 140-only mode").
func TestFIPS140Only(t *testing.T) {
	srv := redistest.Start(t)
	u := srv.CreateUser(t, "tenure", "tenure:")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "longjob")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "GODEBUG=fips140=only", fmt.Sprintf("REDIS_URL=redis://%s:%s@%s/0", u.Name, u.Password, srv.Addr()))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if err != nil {
		t.Fatalf("GODEBUG=fips140=only longjob: %v", err)
	}
	for _, want := range []string{"using REDIS_URL", "renewed: it moved", "clean finish"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout does not mention %q", want)
		}
	}
	if log := srv.ACLLog(t); len(log) != 0 {
		t.Errorf("the server refused the demo: %q", log)
	}
}

// Without REDIS_URL in FIPS 140-only mode, the demo says what to set and
// exits with an error, rather than panicking in the embedded miniredis,
// which hashes scripts with SHA-1 itself.
func TestFIPS140OnlyWithoutServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "longjob")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "GODEBUG=fips140=only", "REDIS_URL=")
	out, err := cmd.CombinedOutput()
	t.Logf("output:\n%s", out)
	if err == nil {
		t.Fatal("the demo ran on the embedded miniredis in FIPS 140-only mode")
	}
	if strings.Contains(string(out), "panic") || !strings.Contains(string(out), "set REDIS_URL") {
		t.Fatalf("want an error that says to set REDIS_URL, no panic")
	}
}
