// Command tenure runs commands under tenure leases and inspects them.
//
//	tenure run NAME [--] CMD ARGS...    run CMD while holding a lease on NAME
//	tenure run NAME                     hold NAME until a signal or the end of stdin
//	tenure elect NAME [--] CMD ARGS...  run CMD only while this process leads NAME
//	tenure elect NAME                   lead NAME until a signal or the end of stdin
//	tenure elect --observe NAME         print every change of leader of NAME
//	tenure status NAME                  who holds NAME, for how long, under which fence
//	tenure status --watch NAME...       print every change of holder of the NAMEs
//	tenure list [PATTERN]               every held name (SCAN, never KEYS)
//	tenure release --force NAME         take NAME from whoever holds it (operators)
//	tenure version                      the version, commit and Go it was built with
//
// The Redis deployment comes from --redis or $REDIS_URL, else
// redis://127.0.0.1:6379:
//
//	redis://[user[:pass]@]host:port[/db], rediss://... (TLS), unix:///path.sock, host:port
//	    one server (URLs as go-redis parses them)
//	redis-sentinel://[user[:pass]@]host:port[,host:port...]/master-name[?db=N]
//	    a Sentinel group, by its sentinels' addresses (rediss-sentinel:// for TLS)
//	redis-cluster://[user[:pass]@]host:port[,host:port...]
//	    a Cluster, by any of its nodes (rediss-cluster:// for TLS)
//
// --redis given several times is quorum mode (lease.NewQuorum): each value is
// one independent primary; status and list show the majority's view and each
// node's, release --force runs on every node, and elect and run -n are refused.
// The password comes from the URL, --redis-password-file or
// $TENURE_REDIS_PASSWORD (for every URL without one of its own; a URL that names
// a user without any password is a usage error); TLS files from --tls-ca,
// --tls-cert and --tls-key (or $TENURE_TLS_CA, $TENURE_TLS_CERT,
// $TENURE_TLS_KEY), for every rediss URL. Exit
// status 78 means that Redis refused the user (permissions, password, or a
// TLS certificate). -v logs what the lease does to stderr (-vv every
// renewal too). Durations take a unit ("30s", "1m", "500ms"). Run "tenure
// help" or "tenure CMD --help" for every flag, "tenure help redis" for the
// forms of --redis, and "tenure help exit-status" for the exit statuses.
package main

// The entry point: the root command, with the flags every subcommand shares
// (globals), and a run of tenure to its exit status.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/lease"
)

func main() {
	// go-redis logs dial failures on its own; tenure reports errors in one
	// line of its own instead.
	redis.SetLogger(silent{})
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}

type silent struct{}

func (silent) Printf(context.Context, string, ...any) {}

// globals are the flags every subcommand shares.
type globals struct {
	conn    connFlags
	prefix  string
	verbose int
	// user is the Redis user connected as ("" for default), for messages.
	user string
	// stderr is tenure's stderr, which hides the password and every URL's
	// user information from whatever is written to it.
	stderr *redactor

	// log is -v's logger (a discarding one without -v), set before a
	// subcommand runs; flush writes out what it has queued.
	log   *slog.Logger
	flush func()
}

// execute runs tenure with args and returns its exit status.
func execute(args []string, stdout, rawStderr io.Writer) int {
	root, g := newRoot(stdout, rawStderr)
	stderr := g.stderr
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	// -v's records come before tenure's last word, as they happened.
	g.flush()
	if err == nil {
		return 0
	}
	var xe *exitErr
	if errors.As(err, &xe) {
		if xe.err != nil {
			fmt.Fprintln(stderr, "tenure:", oneLine(xe.err.Error()))
		}
		return xe.code
	}
	// Anything else comes from cobra's parsing: a usage error. Its
	// suggestions for an unknown command go on lines of their own.
	msg, suggestions, _ := strings.Cut(err.Error(), "\n\nDid you mean this?")
	fmt.Fprintf(stderr, "tenure: %s (see '%s --help')\n", oneLine(msg), cmd.CommandPath())
	if s := strings.Fields(suggestions); len(s) > 0 {
		fmt.Fprintf(stderr, "Did you mean this?\n  %s\n", strings.Join(s, "\n  "))
	}
	return exitUsage
}

func newRoot(stdout, stderr io.Writer) (*cobra.Command, *globals) {
	g := &globals{log: slog.New(slog.DiscardHandler), flush: func() {}, stderr: &redactor{w: stderr}}
	root := &cobra.Command{
		Use:   "tenure",
		Short: "Run commands under auto-renewing leases on Redis, and inspect them",
		Long:  rootLong,
		// cobra prints it for --version, with the template below.
		Version:       versionText(),
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			g.log, g.flush = newLogger(g.verbose, cmd.ErrOrStderr())
		},
	}
	root.SetVersionTemplate(`{{.Version}}`)
	root.SetHelpTemplate(helpTemplate)
	// Flag descriptions wrapped to an 80-column terminal: run's were up to
	// some 300 columns wide.
	root.SetUsageTemplate(strings.ReplaceAll(root.UsageTemplate(), "FlagUsages |", "FlagUsagesWrapped 80 |"))
	root.SetOut(stdout)
	root.SetErr(g.stderr)
	addConnFlags(root, &g.conn)
	root.PersistentFlags().StringVar(&g.prefix, "prefix", lease.DefaultKeyPrefix, "prefix of every key (lease.WithKeyPrefix)")
	root.PersistentFlags().CountVarP(&g.verbose, "verbose", "v", "run, elect: log to stderr the acquisition, failed renewals, release "+
		"and loss (-vv: every renewal too)")
	// Declared here so that -v stays --verbose's and the usage line says
	// what it does; cobra prints the version when it is set.
	root.Flags().Bool("version", false, "print the version, the commit and Go")
	// "tenure completion bash|zsh|fish|powershell" writes a completion
	// script; NAME arguments complete from the held names (complete.go).
	root.CompletionOptions.HiddenDefaultCmd = false
	root.AddCommand(newRunCmd(g), newElectCmd(g), newStatusCmd(g), newListCmd(g), newReleaseCmd(g), newVersionCmd())
	root.AddCommand(helpTopics(root)...)
	return root, g
}
