package main

// Shell completion ("tenure completion bash"): NAME arguments complete
// from the names held on the server.

import (
	"context"
	"time"

	"github.com/spf13/cobra"
)

// completionTimeout bounds the read of held names for a completion: a
// shell waits for it at every Tab.
const completionTimeout = time.Second

// completeNames completes NAME arguments with the names held on the
// server (as list finds them) that start with what is typed, leaving out
// those already given. When the server cannot be reached, or refuses, it
// completes nothing, quietly: a completion must not print.
func (g *globals) completeNames(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	client, err := g.connect(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer client.Close()
	names, err := client.scanNames(ctx, g.prefix, escapeGlob(toComplete)+"*")
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	given := map[string]bool{}
	for _, a := range args {
		given[a] = true
	}
	out := names[:0]
	for _, n := range names {
		if !given[n] {
			out = append(out, n)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeFirstName completes the NAME of run, elect and release: the
// first argument alone. After it comes "--" and a command, which the
// shell completes as it would (files, commands).
func (g *globals) completeFirstName(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveDefault
	}
	return g.completeNames(cmd, args, toComplete)
}
