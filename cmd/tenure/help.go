package main

// usageStatus is status 2's line, in every table.
const usageStatus = `  2                     usage error: bad flags or arguments; among them a --redis
                        URL of the wrong kind for what it reaches (a Cluster node
                        or a sentinel given as redis://), and a Sentinel master
                        name that the sentinels do not monitor
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
  76                    -n N: NAME's permits are held under another N (the message
                        says both); --resize changes it
  77 (--lost-exit)      the lease was lost while the command ran, or no renewal
                        was confirmed by --grace before its local deadline: the
                        command's process group got SIGTERM, then SIGKILL just
                        before that deadline; or the command exited but the
                        lease was then found taken over; for a hold, the lease
                        was lost while held, or no renewal was confirmed by
                        min(TTL/10, 200ms) before its deadline; either way
                        tenure exits before that deadline
` + refusedStatus + `  126, 127              the command could not be executed, or was not found
  128+N                 tenure got signal N while it waited for Redis or the lease
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
