package main

// "tenure list": every held name that matches a glob, found with SCAN.

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	tenureinspect "github.com/tenure-go/tenure/inspect"
)

func newListCmd(g *globals) *cobra.Command {
	var asJSON, asRedisson bool
	cmd := &cobra.Command{
		Use:   "list [flags] [PATTERN]",
		Short: "List held names matching a glob PATTERN (default *)",
		Long: `List every held name (lease, reentrant lock or permits) whose name matches
PATTERN, a Redis glob (* ? [abc]), with its kind, TTL left, fence and holders.
Kind "permits" is a semaphore's, or a read-write lock's readers (the server
cannot tell them apart; "status --help" says more): HOLDERS counts the live
permits and names their holders ("?" for a permit without an identity), and
--json gives each permit's fence and TTL. Names are
found with SCAN, never KEYS, so a large keyspace is walked without blocking
Redis; a name taken or released meanwhile may or may not be listed. A PATTERN
that Redis would misread (a [ that no ] closes, a trailing \) is a usage error.

` + operatorExitStatuses,
		Example: `  tenure list
  tenure list 'report-*'
  tenure list --json | jq -r '.[] | select(.kind == "reentrant") | .name'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pattern := "*"
			if len(args) == 1 && args[0] != "" {
				pattern = args[0]
			}
			if err := checkPattern(pattern); err != nil {
				return fail(exitUsage, "%v", err)
			}
			if asRedisson {
				return listRedisson(cmd, g, pattern, asJSON) // redisson_status.go
			}
			hs, err := listHeld(g, pattern)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, hs)
			}
			return printList(out, hs)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	cmd.Flags().BoolVar(&asRedisson, "redisson", false, "list Redisson's locks instead (RLock, RFencedLock, RFairLock, RReadWriteLock: "+
		"hashes of owner fields <client id>:<thread id>, as a Java service's Redisson holds them) and its "+
		"RPermitExpirableSemaphores with a permit taken, PATTERN matching their names as Redisson stores them (no --prefix)")
	return cmd
}

// listHeld finds the held names that match pattern and reads them, 500
// names a round trip.
func listHeld(g *globals, pattern string) ([]holding, error) {
	ctx := context.Background()
	client, err := g.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	names, err := client.scanNames(ctx, g.prefix, pattern)
	if err != nil {
		return nil, g.redisFailure("scanning", err)
	}
	hs := []holding{}
	for len(names) > 0 {
		n := min(len(names), 500)
		batch, err := client.inspect(ctx, g.prefix, names[:n])
		if err != nil {
			return nil, g.redisFailure("reading", err)
		}
		for _, h := range batch {
			if h.Kind != "free" { // released since the scan
				hs = append(hs, h)
			}
		}
		names = names[n:]
	}
	return hs, nil
}

// printList prints hs as list does without --json: a table.
func printList(out io.Writer, hs []holding) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tTTL\tFENCE\tHOLDERS")
	for _, h := range hs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", h.Name, h.Kind, h.ttl(), h.Fence, h.holders())
	}
	return tw.Flush()
}

// scanNames finds the names whose lock keys exist and match pattern, sorted
// (on a Cluster, every primary's).
func scanNames(ctx context.Context, c redis.UniversalClient, prefix, pattern string) ([]string, error) {
	return tenureinspect.Names(ctx, c, prefix, pattern)
}
