package main

// run --metadata, stored with the lease or permit and shown by status; bad
// metadata is a usage error.

import (
	"encoding/json"
	"strings"
	"testing"
)

// run --metadata stores what the run is with its lease; status shows it
// (and --json carries it); bad metadata is a usage error.
func TestRunMetadata(t *testing.T) {
	code, out, errOut := result(t, tenure("run", "--metadata", "deploy #7", "meta-job", "--",
		bin, "status", "meta-job"))
	if code != 0 || !strings.Contains(out, `metadata  "deploy #7"`) {
		t.Fatalf("status under run --metadata: %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = result(t, tenure("run", "--metadata", "build 3", "-n", "2", "meta-sem", "--",
		bin, "status", "--json", "meta-sem"))
	var h struct {
		Permits []struct {
			Metadata string `json:"metadata"`
		} `json:"permits"`
	}
	if err := json.Unmarshal([]byte(out), &h); code != 0 || err != nil || len(h.Permits) != 1 || h.Permits[0].Metadata != "build 3" {
		t.Fatalf("status --json of a permit run with --metadata: %d %v\n%s%s", code, err, out, errOut)
	}
	for _, bad := range []string{"a{b}", strings.Repeat("x", 257), "tab\there"} {
		if code, _, errOut := result(t, tenure("run", "--metadata", bad, "meta-bad", "--", "true")); code != exitUsage ||
			!strings.Contains(errOut, "--metadata") {
			t.Errorf("--metadata %q: exit %d, %s", bad, code, errOut)
		}
	}
}
