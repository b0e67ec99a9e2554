// Command tenure runs commands under tenure leases and inspects them.
//
//	tenure run NAME -- CMD ARGS...      run CMD while holding a lease on NAME
//	tenure elect NAME -- CMD ARGS...    run CMD only while this process leads NAME
//	tenure elect --observe NAME         print every change of leader of NAME
//	tenure status NAME                  who holds NAME, for how long, under which fence
//	tenure status --watch NAME...       print every change of holder of the NAMEs
//	tenure list [PATTERN]               every held name (SCAN, never KEYS)
//	tenure release --force NAME         take NAME from whoever holds it (operators)
//	tenure version                      the version, commit and Go it was built with
//
// The Redis server comes from --redis or $REDIS_URL (redis://, rediss:// or
// unix:// URLs as go-redis parses them, or a bare host:port), else
// redis://127.0.0.1:6379. -v logs what the lease does to stderr (-vv every
// renewal too). Durations take a unit ("30s", "1m", "500ms"). Run "tenure
// help" or "tenure CMD --help" for every flag, and "tenure run --help" for
// the exit statuses.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/lease"
)

// Exit statuses of tenure itself; a command run by "run" or "elect"
// otherwise passes its own status through.
const (
	exitError   = 1   // any other failure
	exitUsage   = 2   // bad flags or arguments
	exitRedis   = 69  // Redis unreachable or failing (EX_UNAVAILABLE)
	exitTimeout = 75  // --wait ran out: the name is held (EX_TEMPFAIL)
	exitLost    = 77  // the lease or leadership was lost while the command ran (EX_NOPERM)
	exitNoExec  = 126 // the command could not be executed
	exitNoCmd   = 127 // the command was not found
	// A command killed by signal N, or a wait interrupted by it: 128+N.
)

// exitStatuses is the exit status table of tenure and of "run". "elect"
// has no --wait, so its table (electExitStatuses) lacks status 75.
const exitStatuses = exitStatusesHead + exitStatusWait + exitStatusesTail

const electExitStatuses = exitStatusesHead + exitStatusesTail

const exitStatusesHead = `Exit status:
  the command's own     when it exits by itself (128+N when killed by signal N)
  2                     usage error: bad flags or arguments (a --grace too long
                        for --ttl among them)
  69                    Redis unreachable or failing
`

const exitStatusWait = `  75                    --wait ran out while another holder held NAME
`

const exitStatusesTail = `  77                    the lease (or leadership) was lost while the command ran,
                        or no renewal was confirmed by --grace before its local
                        deadline: the command's process group got SIGTERM, then
                        SIGKILL just before that deadline; or the command exited
                        but the lease was then found taken over
  126, 127              the command could not be executed, or was not found
  128+N                 tenure got signal N while it waited for the lease
  1                     any other error`

// exitErr carries an exit status and the one line to print.
type exitErr struct {
	code int
	err  error
}

func (e *exitErr) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitErr) Unwrap() error { return e.err }

func fail(code int, format string, args ...any) error {
	return &exitErr{code: code, err: fmt.Errorf(format, args...)}
}

// status ends tenure with code and no message (a command's own status).
func status(code int) error { return &exitErr{code: code} }

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
	redis   string
	prefix  string
	verbose int

	// log is -v's logger (a discarding one without -v), set before a
	// subcommand runs; flush writes out what it has queued.
	log   *slog.Logger
	flush func()
}

// execute runs tenure with args and returns its exit status.
func execute(args []string, stdout, stderr io.Writer) int {
	root, g := newRoot(stdout, stderr)
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
	// Anything else comes from cobra's parsing: a usage error.
	fmt.Fprintf(stderr, "tenure: %s (see '%s --help')\n", oneLine(err.Error()), cmd.CommandPath())
	return exitUsage
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func newRoot(stdout, stderr io.Writer) (*cobra.Command, *globals) {
	g := &globals{log: slog.New(slog.DiscardHandler), flush: func() {}}
	root := &cobra.Command{
		Use:   "tenure",
		Short: "Run commands under auto-renewing leases on Redis, and inspect them",
		Long: `tenure runs commands under auto-renewing leases on Redis, elects one leader among
several processes, and shows and releases the leases that are held.

The Redis server comes from --redis or $REDIS_URL: a redis://, rediss:// (TLS) or
unix:// URL, or a bare host:port; the default is redis://127.0.0.1:6379. Every
duration takes a unit: "30s", "1m", "500ms".

` + exitStatuses,
		// cobra prints it for --version, with the template below.
		Version:       versionText(),
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			g.log, g.flush = newLogger(g.verbose, cmd.ErrOrStderr())
		},
	}
	root.SetVersionTemplate(`{{.Version}}`)
	root.SetOut(stdout)
	root.SetErr(stderr)
	def := os.Getenv("REDIS_URL")
	if def == "" {
		def = "redis://127.0.0.1:6379"
	}
	root.PersistentFlags().StringVar(&g.redis, "redis", def, "Redis URL (redis://[user:pass@]host:port/db, rediss://..., unix://...) or host:port; default $REDIS_URL")
	root.PersistentFlags().StringVar(&g.prefix, "prefix", lease.DefaultKeyPrefix, "prefix of every key, as lease.WithKeyPrefix")
	root.PersistentFlags().CountVarP(&g.verbose, "verbose", "v", "run, elect: log to stderr what the lease does: -v its acquisition, failed renewals, release and loss; "+
		"-vv also every renewal")
	// Declared here so that -v stays --verbose's and the usage line says
	// what it does; cobra prints the version when it is set.
	root.Flags().Bool("version", false, "print tenure's version, the commit it was built from, and its Go version")
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(newRunCmd(g), newElectCmd(g), newStatusCmd(g), newListCmd(g), newReleaseCmd(g), newVersionCmd())
	return root, g
}

// parseRedis turns --redis into client options: a URL as go-redis's
// ParseURL reads it, or a bare host:port.
func parseRedis(s string) (*redis.Options, error) {
	if s == "" {
		return nil, errors.New("no Redis address: set --redis or REDIS_URL")
	}
	if !strings.Contains(s, "://") {
		if strings.ContainsAny(s, "/?#@ \t\r\n") || !strings.Contains(s, ":") {
			return nil, fmt.Errorf("redis address %q is neither a URL nor host:port", s)
		}
		return &redis.Options{Addr: s}, nil
	}
	opts, err := redis.ParseURL(s)
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	return opts, nil
}

// connect returns a client for --redis that answered a PING.
func (g *globals) connect(ctx context.Context) (*redis.Client, error) {
	opts, err := parseRedis(g.redis)
	if err != nil {
		return nil, fail(exitUsage, "%v", err)
	}
	if err := checkPrefix(g.prefix); err != nil {
		return nil, fail(exitUsage, "%v", err)
	}
	opts.ContextTimeoutEnabled = true
	opts.DialTimeout = 3 * time.Second
	opts.MaxRetries = 1
	client := redis.NewClient(opts)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		client.Close()
		return nil, fail(exitRedis, "redis at %s: %v", opts.Addr, err)
	}
	return client, nil
}

func checkPrefix(p string) error {
	if err := keys.CheckPrefix(p); err != nil {
		return fmt.Errorf("--prefix %v", err)
	}
	return nil
}

// checkName rejects what lease would reject, as a usage error.
func checkName(name string) error {
	if err := keys.CheckName(name); err != nil {
		return fmt.Errorf("invalid NAME: %v", err)
	}
	return nil
}
