package main

// What follows the flags of run and elect: NAME, then COMMAND with or
// without "--", or tenure's flags in the form earlier releases took.

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// invocation is what follows the flags of run or elect: NAME, and the
// command to run under it, if any.
type invocation struct {
	name string
	argv []string // COMMAND and its arguments; none: hold NAME
}

// errHelpShown ends tenure with status 0 once --help, given after NAME,
// has been answered.
var errHelpShown = &exitErr{code: 0}

// commandRule is how run and elect (cmd) read what follows NAME, for
// their --help.
func commandRule(cmd string) string {
	return strings.NewReplacer("CMD", cmd).Replace(`tenure's flags go before NAME; what follows NAME is COMMAND and its arguments,
with or without "--" between them: "tenure CMD --ttl 5s NAME ls -l" runs
"ls -l", and so does "tenure CMD --ttl 5s NAME -- ls -l". Flags after NAME are
COMMAND's, except in the form earlier releases took, tenure's flags after NAME
and then "--" and COMMAND ("tenure CMD NAME --ttl 5s -- ls -l"): when the
first word after NAME starts with "-", the words up to "--" are tenure's flags.`)
}

// parseInvocation reads "NAME [--] [COMMAND [ARGS...]]". The flags of run
// and elect stop at NAME (SetInterspersed(false)), so that COMMAND's flags
// are its own, as with flock, "etcdctl lock" and "consul lock". After NAME
// come:
//   - nothing: hold NAME (run) or the leadership (elect) without a command;
//   - "--" and COMMAND;
//   - COMMAND, when its first word does not start with "-";
//   - tenure's flags (a first word that starts with "-"), up to "--" and
//     COMMAND, or to the end: the form "NAME --ttl 5s -- COMMAND", which
//     earlier releases took since their flags went anywhere.
func parseInvocation(cmd *cobra.Command, args []string, g *globals) (invocation, error) {
	alone := "NAME alone to hold it"
	if cmd.Name() == "elect" {
		alone = "NAME alone to lead"
	}
	if len(args) == 0 || cmd.ArgsLenAtDash() == 0 {
		return invocation{}, fail(exitUsage, "want NAME [--] COMMAND [ARGS...], or %s (see '%s --help')", alone, cmd.CommandPath())
	}
	inv := invocation{name: args[0]}
	rest := args[1:]
	dash := false
	switch {
	case len(rest) == 0:
	case rest[0] == "--":
		dash, inv.argv = true, rest[1:]
	case strings.HasPrefix(rest[0], "-") && rest[0] != "-":
		var err error
		if inv.argv, dash, err = lateFlags(cmd, rest, g); err != nil {
			return inv, err
		}
	default:
		inv.argv = rest
	}
	if dash && len(inv.argv) == 0 {
		return inv, fail(exitUsage, `no COMMAND after "--": want NAME -- COMMAND [ARGS...], or %s (see '%s --help')`, alone, cmd.CommandPath())
	}
	if err := checkName(inv.name); err != nil {
		return inv, fail(exitUsage, "%v", err)
	}
	return inv, nil
}

// lateFlags parses tenure's flags given after NAME, rest: up to "--" (or
// to the end), after which comes COMMAND. It answers --help there, and
// remakes -v's logger when -v came there.
func lateFlags(cmd *cobra.Command, rest []string, g *globals) (argv []string, dash bool, err error) {
	flags := rest
	if i := slices.Index(rest, "--"); i >= 0 {
		flags, argv, dash = rest[:i], rest[i+1:], true
	}
	verbose := g.verbose
	fs := cmd.Flags()
	if err := fs.Parse(flags); err != nil {
		return nil, false, fail(exitUsage, "%v after NAME (see '%s --help')", err, cmd.CommandPath())
	}
	if left := fs.Args(); len(left) > 0 {
		return nil, false, fail(exitUsage, `%q after NAME and flags: COMMAND goes right after NAME, or after "--" `+
			`when tenure's flags follow NAME (see '%s --help')`, left[0], cmd.CommandPath())
	}
	if help, _ := fs.GetBool("help"); help {
		if err := cmd.Help(); err != nil {
			return nil, false, err
		}
		return nil, false, errHelpShown
	}
	if g.verbose != verbose {
		g.flush()
		g.log, g.flush = newLogger(g.verbose, cmd.ErrOrStderr())
	}
	return argv, dash, nil
}
