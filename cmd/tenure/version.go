package main

// "tenure version" and --version, from the binary's build information.

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// versionText is what "tenure --version" and "tenure version" print, from
// the build information the go command stamps into the binary: the
// module's version (a release tag for "go install ...@v1.2.3", "(devel)"
// or a pseudo-version for a build from a checkout), then the commit it was
// built from ("unknown commit" when the build recorded none: -buildvcs=false,
// or no checkout), and the Go toolchain. The first
// line alone is "tenure VERSION", for scripts.
func versionText() string {
	var b strings.Builder
	version := "(unknown)"
	bi, ok := debug.ReadBuildInfo()
	if ok && bi.Main.Version != "" {
		version = bi.Main.Version
	}
	fmt.Fprintf(&b, "tenure %s\n", version)
	if ok {
		var rev, when string
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		switch {
		case rev == "":
			// Built with -buildvcs=false, or outside a checkout: say
			// so, rather than leave the reader to guess.
			fmt.Fprintf(&b, "  revision  unknown commit (the build recorded none)\n")
		case modified:
			fmt.Fprintf(&b, "  revision  %s (modified)\n", rev)
		default:
			fmt.Fprintf(&b, "  revision  %s\n", rev)
		}
		if when != "" {
			fmt.Fprintf(&b, "  committed %s\n", when)
		}
	}
	goVersion := runtime.Version()
	if ok && bi.GoVersion != "" {
		goVersion = bi.GoVersion
	}
	fmt.Fprintf(&b, "  go        %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	return b.String()
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print tenure's version, the commit it was built from, and Go's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionText())
			return err
		},
	}
}
