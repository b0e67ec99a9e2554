package main

// The helps: their exit status tables, and their shape (help.go).

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestHelpExitStatuses: every help that lists exit statuses lists 78.
func TestHelpExitStatuses(t *testing.T) {
	for _, args := range [][]string{{"help", "exit-status"}, {"run", "--help"}, {"elect", "--help"}, {"status", "--help"}, {"list", "--help"},
		{"release", "--help"}} {
		code, out, _ := result(t, on(nil, args...))
		if code != 0 || !strings.Contains(out, "Exit status:") || !strings.Contains(out, "\n  78 ") || !strings.Contains(out, "Redis refused the user") {
			t.Errorf("%v: %d, no status 78 in:\n%s", args, code, out)
		}
	}
}

// TestHelpShape: the top-level help is one screen (it printed about 90
// lines before "Usage:"), with an example for each command and the
// topics that took its tables; a command's usage comes before its long
// description (run's printed some 180 lines before it); and elect's help
// has none of run's statuses or flags (75, 76, --held-exit, a hold).
func TestHelpShape(t *testing.T) {
	_, root, _ := result(t, tenure("--help"))
	lines := strings.Split(strings.TrimSuffix(root, "\n"), "\n")
	// An 80x24 terminal: it had 44 lines, 12 of them wider (the --redis
	// flag's was 246 columns).
	if len(lines) > 23 || !slices.Contains(lines[:10], "Usage:") {
		t.Errorf("the top-level help has %d lines, \"Usage:\" at %d:\n%s", len(lines), slices.Index(lines, "Usage:"), root)
	}
	for i, l := range lines {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("line %d of the top-level help is %d columns wide: %q", i+1, n, l)
		}
	}
	_, flags, _ := result(t, tenure("help", "flags"))
	for _, want := range []string{"--redis stringArray", "--redis-password-file", "--tls-ca", "--prefix", "--verbose"} {
		if !strings.Contains(flags, want) {
			t.Errorf("help flags lacks %q:\n%s", want, flags)
		}
	}
	for _, want := range []string{"tenure run ", "tenure elect ", "tenure status ", "tenure list ", "tenure release ",
		"tenure completion bash", "tenure version", `"tenure help flags"`, `"tenure help redis"`, `"tenure help exit-status"`} {
		if !strings.Contains(root, want) {
			t.Errorf("the top-level help lacks %q:\n%s", want, root)
		}
	}
	if strings.Contains(root, "Exit status:") {
		t.Errorf("the top-level help still has the exit status table:\n%s", root)
	}
	for _, cmd := range []string{"run", "elect", "status", "list", "release"} {
		_, out, _ := result(t, tenure("help", cmd))
		if i := slices.Index(strings.Split(out, "\n"), "Usage:"); i < 0 || i > 3 {
			t.Errorf("help %s: \"Usage:\" at line %d:\n%s", cmd, i, out)
		}
	}
	_, elect, _ := result(t, tenure("elect", "--help"))
	for _, runOnly := range []string{"\n  75 ", "\n  76 ", "--held-exit", "run NAME without COMMAND", "--wait"} {
		if strings.Contains(elect, runOnly) {
			t.Errorf("elect --help says %q, which is run's:\n%s", runOnly, elect)
		}
	}
	_, redisTopic, _ := result(t, tenure("help", "redis"))
	for _, want := range []string{"redis-sentinel://", "redis-cluster://", "Quorum mode", "visible to every user of the machine", "--tls-ca"} {
		if !strings.Contains(redisTopic, want) {
			t.Errorf("help redis lacks %q:\n%s", want, redisTopic)
		}
	}
}

// TestHelpFitsEightyColumns: every command's help and every help topic
// fits an 80-column terminal (release --help had a line of 98 columns,
// elect --help two of 81, help redis three, up to 104).
func TestHelpFitsEightyColumns(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"run", "--help"}, {"elect", "--help"}, {"status", "--help"}, {"list", "--help"},
		{"release", "--help"}, {"completion", "--help"}, {"version", "--help"},
		{"help", "flags"}, {"help", "redis"}, {"help", "exit-status"},
	} {
		_, out, _ := result(t, tenure(args...))
		if out == "" {
			t.Errorf("tenure %s printed nothing", strings.Join(args, " "))
		}
		for i, l := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(l); n > 80 {
				t.Errorf("tenure %s, line %d: %d columns: %q", strings.Join(args, " "), i+1, n, l)
			}
		}
	}
}
