package main

// The root's help, the help topics ("tenure help redis", "tenure help
// exit-status"), and the exit status tables the commands' helps share.
// The top-level help is one screen: what tenure is, its commands, one
// example each. What a newcomer looks up later lives in "tenure help
// TOPIC" (the forms of --redis, the exit statuses) and in each command's
// help.

import "github.com/spf13/cobra"

// rootLong is the whole of "tenure --help": it fits an 80x24 terminal,
// so cobra's command list and flag table (whose --redis line alone was
// 246 columns) give way to one example of each command, the shared flags
// by name, and the topics that hold the details ("tenure help flags").
const rootLong = `tenure runs a command while it holds an auto-renewing lease on Redis, one at a
time or N at once across hosts, and stops it before the lease could expire; it
elects leaders, and shows and releases what is held.

Usage:
  tenure COMMAND [flags] NAME ...

Commands, with an example of each:
` + rootExample + `

Flags of every command: --redis URL (default $REDIS_URL, else
redis://127.0.0.1:6379), --redis-password-file, --tls-ca, --tls-cert,
--tls-key, --prefix, -v; durations take a unit ("30s", "1m").
A password in --redis is visible to every user of the machine: use $REDIS_URL.
Topics: "tenure help flags" (those flags), "tenure help redis" (the forms of
--redis, quorum mode, passwords, TLS), "tenure help exit-status".
"tenure COMMAND --help" says everything of COMMAND.`

const rootExample = `  tenure run nightly-report ./report.sh   run it while holding the lease
  tenure elect scheduler ./scheduler      run it only while this process leads
  tenure status nightly-report            who holds it, for how long, its fence
  tenure list 'report-*'                  every held name that matches
  tenure release --force nightly-report   take it from its holder (operators)
  tenure completion bash                  a shell completion script
  tenure version                          the version, commit and Go`

// helpTemplate puts a command's usage, examples and flags first, right
// after its one-line summary, and its long description after them: the
// description of run is a long reference, which pushed "Usage:" off the
// first screen. The help topics (which have no usage) keep cobra's order;
// the root's help is its description alone (rootLong).
const helpTemplate = `{{if not .HasParent}}{{.Long | trimTrailingWhitespaces}}
{{else if or .Runnable .HasSubCommands}}{{.Short | trimTrailingWhitespaces}}

{{.UsageString}}{{with .Long}}
{{. | trimTrailingWhitespaces}}
{{end}}{{else}}{{with (or .Long .Short)}}{{. | trimTrailingWhitespaces}}

{{end}}{{if or .Runnable .HasSubCommands}}{{.UsageString}}{{end}}{{end}}`

// helpTopics are "tenure help redis" and "tenure help exit-status":
// commands without a Run, which cobra lists as additional help topics.
func helpTopics(root *cobra.Command) []*cobra.Command {
	return []*cobra.Command{
		{Use: "flags", Short: "The flags every command takes", Long: "The flags every command takes:\n\n" +
			root.PersistentFlags().FlagUsagesWrapped(80) + "\n" +
			"run and elect take more, and so do the others: \"tenure COMMAND --help\"."},
		{Use: "redis", Short: "How tenure reaches Redis: --redis and its forms, quorum mode, passwords, TLS", Long: redisHelp},
		{Use: "exit-status", Short: "The exit statuses of every command", Long: exitStatusHelp},
	}
}

const redisHelp = `Redis comes from --redis or $REDIS_URL; the default is redis://127.0.0.1:6379.
--redis takes
` + redisForms + `.

A URL of the wrong kind for what it reaches is a usage error (2) that says
which URL to use: a plain redis:// URL at a Cluster node (only the names whose
slots that node serves would work) or at a sentinel, a redis-cluster:// or
redis-sentinel:// URL at a single server, a Sentinel URL without a master name
or with one that the sentinels do not monitor (both name those they monitor),
and an address where something else answers ("not a Redis server (it answered
HTTP)"). A server that accepts the connection and never answers is "no reply
in 5s: is this a Redis server?" (69). A refused connection (every seed's, for
a Cluster) is 69 at once.

A Sentinel URL's user and password authenticate to the data nodes; the
sentinels themselves are reached without a password. Over a Cluster, "list"
scans every primary.

Quorum mode: --redis given several times (at least 3, an odd number) names
independent primaries, and a lease is held when a majority of them hold it
(lease.NewQuorum, the Redlock algorithm). "status" and "list" read every node
and show the majority's view (a name is held when a majority holds the same
lease; its fence is the largest among them, its TTL the shortest), and status
shows each node's own view too; "release --force" revokes on every node and
succeeds when a majority answered; "elect" and "run -n" are refused (quorum mode
has no leader record and no semaphore). $REDIS_URL names one deployment only.

The password comes from the URL (redis://USER:PASSWORD@host:port), from
--redis-password-file FILE, or from $TENURE_REDIS_PASSWORD, with the user, if
any, in the URL (redis://USER@host:port); two of them at once is a usage error,
and so is a user with no password (a user with nopass takes any). The file and
the variable serve every --redis without a password of its own.
A password in --redis is visible to every user of the machine (ps, /proc):
prefer $REDIS_URL, the file, or the variable. tenure never prints it: its
errors and -v logs hide the user information of every URL. The commands tenure
runs do not get $TENURE_REDIS_PASSWORD.

Over TLS (a rediss URL: rediss://, rediss-sentinel://, rediss-cluster://;
the files serve each of them), --tls-ca (or $TENURE_TLS_CA) is a PEM file of the
authorities to trust for the server's certificate (default: the system's), and
--tls-cert and --tls-key ($TENURE_TLS_CERT, $TENURE_TLS_KEY) a client
certificate and its key, for a server that asks for one. docs/security.md
lists the commands, keys and channels a tenure user needs, and the ACL lines
for a single server and for a Cluster.`

const exitStatusHelp = `run (and every command, for the statuses they share):

` + runExitStatuses + `

elect: as run, without 75 and 76 (elect does not wait with --wait, and has no
permits); without COMMAND it ends with 0 on a signal or the end of stdin, and
with 77 when the leadership is lost.

status, list and release:

` + operatorExitStatuses + `
  1 (status --check)    NAME is free (with -n N: one of N permits is free)`

// usageStatus is status 2's line, in every table.
const usageStatus = `  2                     usage error: bad flags or arguments; among them a
                        --redis URL of the wrong kind for what it reaches (a
                        Cluster node or a sentinel given as redis://, something
                        that is not Redis, such as an HTTP server), and a
                        Sentinel master name that is missing or that the
                        sentinels do not monitor
`

// refusedStatus is status 78's line, in every table.
const refusedStatus = `  78                    Redis refused the user: a command, key or channel not
                        allowed (NOPERM, or a command one of tenure's scripts
                        called), a wrong or missing password (WRONGPASS,
                        NOAUTH), or a certificate refused in the TLS handshake;
                        the message names what was refused
`

// operatorExitStatuses is the exit status table of status, list and
// release.
const operatorExitStatuses = `Exit status:
  0                     done (whether NAME is held or not)
` + usageStatus + `  69                    Redis unreachable or failing
` + refusedStatus + `  1                     any other error`

// runExitStatuses is the exit status table of "run".
const runExitStatuses = `Exit status:
  the command's own     when it exits by itself (128+N when killed by signal N)
  0                     run NAME without COMMAND (a hold): ended by a signal or
                        the end of stdin, and released
` + usageStatus + `                        (a --grace too long for --ttl too)
  69                    Redis unreachable or failing (with --wait given, once it
                        ran out)
  75 (--held-exit)      --wait ran out while another holder held NAME, or the
                        one attempt of --wait 0 found it held
  76                    -n N: NAME's permits are held under another N (the
                        message says both); --resize changes it
  77 (--lost-exit)      the lease was lost while the command ran, or no renewal
                        was confirmed by --grace before its local deadline: the
                        command's process group got SIGTERM, then SIGKILL just
                        before that deadline; or the command exited but the
                        lease was then found taken over; for a hold, the lease
                        was lost while held, or no renewal was confirmed by
                        min(TTL/10, 200ms) before its deadline; either way
                        tenure exits before that deadline
` + refusedStatus + `  126, 127              the command could not be executed, or was not found
  128+N                 tenure got signal N while it waited for Redis or the
                        lease
  1                     any other error

A command's own status passes through as is, so a command that exits 75 or 77
itself looks like tenure's "held" or "lost": where the caller must tell them
apart, give --held-exit and --lost-exit statuses the command never uses (say
--held-exit 200 --lost-exit 201). They take 1 to 255 and must differ.`

// electExitStatuses is the exit status table of "elect": no --wait, no
// permits, and a term without a command in place of a hold.
const electExitStatuses = `Exit status:
  the command's own     when it exits by itself (128+N when killed by signal N)
  0                     elect NAME without COMMAND: ended by a signal or the end
                        of stdin, and resigned; elect --observe ended by SIGINT
                        or SIGTERM
` + usageStatus + `                        (a --grace too long for --ttl too)
  69                    Redis unreachable or failing
  77 (--lost-exit)      leadership was lost while the command ran, or no renewal
                        was confirmed by --grace before its local deadline: the
                        command's process group got SIGTERM, then SIGKILL just
                        before that deadline; or the command exited but the
                        lease was then found taken over; without COMMAND,
                        leadership was lost while held, or no renewal was
                        confirmed by min(TTL/10, 200ms) before its deadline;
                        either way tenure exits before that deadline
` + refusedStatus + `  126, 127              the command could not be executed, or was not found
  128+N                 tenure got signal N while it campaigned
  1                     any other error

A command's own status passes through as is, so a command that exits 77 itself
looks like tenure's "lost": where the caller must tell them apart, give
--lost-exit a status the command never uses (say --lost-exit 201; 1 to 255).`
