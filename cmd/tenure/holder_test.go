package main

// run --holder, stored with the lease and shown by status and list.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tenure run stores who holds the lease (--holder, host/pid by default)
// with it, and status and list show it.
func TestRunHolderShown(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	run := tenure("run", "--ttl", "5s", "--holder", "batch-7/4242", "holder-shown", "--",
		"sh", "-c", `echo up > "$1"; sleep 30`, "sh", started)
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Process.Kill(); _ = run.Wait() }()
	waitFile(t, started, 1, 30*time.Second)

	code, out, stderr := result(t, tenure("status", "holder-shown"))
	if code != 0 || !strings.Contains(out, "holder") || !strings.Contains(out, "batch-7/4242") {
		t.Fatalf("status: %d %q %s", code, out, stderr)
	}
	code, out, stderr = result(t, tenure("list", "--json", "holder-*"))
	var hs []holding
	if code != 0 || json.Unmarshal([]byte(out), &hs) != nil || len(hs) != 1 || hs[0].Holder != "batch-7/4242" {
		t.Fatalf("list --json: %d %q %s", code, out, stderr)
	}
	code, out, _ = result(t, tenure("list", "holder-*"))
	if code != 0 || !strings.Contains(out, "batch-7/4242") {
		t.Fatalf("list: %d %q", code, out)
	}
	_ = run.Process.Kill()
	_ = run.Wait()

	// The default is host/pid.
	host, _ := os.Hostname()
	started2 := filepath.Join(dir, "started2")
	def := tenure("run", "--ttl", "5s", "holder-default", "--", "sh", "-c", `echo up > "$1"; sleep 30`, "sh", started2)
	if err := def.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = def.Process.Kill(); _ = def.Wait() }()
	waitFile(t, started2, 1, 30*time.Second)
	_, out, _ = result(t, tenure("status", "--json", "holder-default"))
	var h holding
	if err := json.Unmarshal([]byte(out), &h); err != nil || h.Holder != fmt.Sprintf("%s/%d", host, def.Process.Pid) {
		t.Fatalf("default holder: %+v (%v), want %s/%d", h, err, host, def.Process.Pid)
	}

	// An unusable identity is a usage error.
	if code, _, stderr := result(t, tenure("run", "--holder", "", "holder-bad", "--", "true")); code != 2 {
		t.Fatalf("--holder '': status %d, want 2: %s", code, stderr)
	}
}
