package main

// list's PATTERN check (flags.go).

import (
	"strings"
	"testing"
)

// TestCheckPattern: patterns Redis reads as meant pass; an unclosed class
// and a trailing backslash are named.
func TestCheckPattern(t *testing.T) {
	for _, p := range []string{"*", "report-*", "a?c", "[abc]*", "[^a-z]x", `\[literal`, `a\\`, "[]", `[\]]`, "[]]"} {
		if err := checkPattern(p); err != nil {
			t.Errorf("checkPattern(%q): %v", p, err)
		}
	}
	for p, want := range map[string]string{
		"[":      "the [ at byte 0",
		"ab[cd":  "the [ at byte 2",
		`[\]`:    "the [ at byte 0",
		`[^`:     "the [ at byte 0",
		`x\`:     "ends in a backslash",
		`[a]b[c`: "the [ at byte 4",
	} {
		if err := checkPattern(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkPattern(%q) = %v, want an error saying %q", p, err, want)
		}
	}
}
