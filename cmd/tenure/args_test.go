package main

// What follows NAME: COMMAND with or without "--", and tenure's flags
// before "--" (args.go).

import (
	"context"
	"strings"
	"testing"
)

// TestCommandAfterName: what follows NAME is COMMAND's, its flags
// included, with or without "--"; tenure's flags after NAME, in the form
// "NAME FLAGS -- COMMAND", are still tenure's (-v there logs), and --help
// there is answered.
func TestCommandAfterName(t *testing.T) {
	script := `printf '%s|' "$TENURE_NAME" "$@"`
	for _, args := range [][]string{
		{"run", "--wait", "10s", "after-name", "sh", "-c", script, "sh", "--wait", "0", "-v", "--"},
		{"run", "--wait", "10s", "after-name", "--", "sh", "-c", script, "sh", "--wait", "0", "-v", "--"},
	} {
		code, out, stderr := result(t, tenure(args...))
		if code != 0 || out != "after-name|--wait|0|-v|--|" || stderr != "" {
			t.Errorf("%q: status %d, stdout %q, stderr %q", args, code, out, stderr)
		}
	}
	code, out, stderr := result(t, tenure("run", "after-name", "-v", "--ttl", "5s", "--", "sh", "-c", script, "sh"))
	if code != 0 || out != "after-name|" || !strings.Contains(stderr, "msg=acquired") || !strings.Contains(stderr, "ttl=5s") {
		t.Errorf("flags after NAME: status %d, stdout %q, stderr %q", code, out, stderr)
	}
	code, out, _ = result(t, tenure("run", "after-name", "--help"))
	if code != 0 || !strings.Contains(out, "Usage:") {
		t.Errorf("--help after NAME: status %d: %s", code, out)
	}
	if n, _ := client(t).Exists(context.Background(), "tenure:{after-name}").Result(); n != 0 {
		t.Error("a run left its lease held")
	}
}
