package main

// Watching: "tenure status --watch" and "tenure elect --observe", each a line
// per change, with its time, until SIGINT or SIGTERM.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/tenure-go/tenure/election"
)

// stampFormat is the time at the start of every line of status --watch and
// elect --observe: RFC 3339 to the millisecond, in local time.
const stampFormat = "2006-01-02T15:04:05.000Z07:00"

// readTimeout bounds each read of a watch: a Redis that does not answer
// (paused, cut off) must not keep SIGINT from ending the watch for long.
const readTimeout = 2 * time.Second

// untilSignal is a context that SIGINT or SIGTERM ends: they end a watch
// and an observation, with status 0.
func untilSignal() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// shown is s as it goes into a line of a watch: as is, or quoted when it
// has spaces or unprintable characters (a name may), so that each line
// stays one line with space-separated fields.
func shown(s string) string {
	for _, r := range s {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) || r == '"' {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

// holder says who holds a name, as status --watch prints it; a change of
// it is a change of holder. The TTL left and the waiters are left out:
// they change without the holder changing.
func (h holding) holder() string {
	var b strings.Builder
	switch h.Kind {
	case "free":
		return "free"
	case "lease":
		fmt.Fprintf(&b, "lease, fence %d", h.Fence)
		if h.Holder != "" {
			fmt.Fprintf(&b, ", holder %s", shown(h.Holder))
		}
	case "reentrant":
		owners := make([]string, 0, len(h.Owners))
		for o := range h.Owners {
			owners = append(owners, shown(o))
		}
		sort.Strings(owners)
		fmt.Fprintf(&b, "reentrant lock, fence %d, owners %s", h.Fence, strings.Join(owners, " "))
	case "permits":
		fmt.Fprintf(&b, "%s, %d held", permitsKind, h.Held)
		if h.Free != nil {
			fmt.Fprintf(&b, ", %d of -n %d free", *h.Free, h.Limit)
		}
		for _, p := range h.Permits {
			fmt.Fprintf(&b, "; fence %d", p.Fence)
			if p.Holder != "" {
				fmt.Fprintf(&b, " holder %s", shown(p.Holder))
			}
		}
	case "revoked":
		fmt.Fprintf(&b, "revoked %s, fence %d, unconfirmed %s", h.Revoked, h.Fence, strings.Join(h.Unconfirmed, " "))
	default:
		fmt.Fprintf(&b, "a %s key that tenure did not write", h.Kind)
	}
	if h.Leader != nil {
		fmt.Fprintf(&b, ", leader %s (term %d)", shown(h.Leader.Identity), h.Leader.Fence)
	}
	return b.String()
}

// watchClient connects for a watch that lasts until SIGINT or SIGTERM: it
// returns the watch's context and client, and done, which closes both. With
// no client, err is what to return: nil when a signal ended the connect.
func watchClient(g *globals, feature string) (context.Context, *conns, func(), error) {
	ctx, stop := untilSignal()
	client, err := g.connectFor(ctx, feature)
	if err != nil {
		interrupted := ctx.Err() != nil // a signal ended the connect: not an error (read before stop, which ends ctx)
		stop()
		if interrupted {
			return nil, nil, nil, nil
		}
		return nil, nil, nil, err
	}
	return ctx, client, func() { _ = client.Close(); stop() }, nil
}

// watchStatus prints the holder of each name at once, then a line for each
// change of holder, reading the names every interval until SIGINT or
// SIGTERM. A Redis that fails is reported once and read again every
// interval: a watch outlives a restart of Redis.
func watchStatus(g *globals, names []string, interval time.Duration, permits int, asJSON bool, out, stderr io.Writer) error {
	ctx, client, done, err := watchClient(g, "")
	if client == nil {
		return err
	}
	defer done()
	enc := json.NewEncoder(out)
	last := map[string]string{}
	failing := ""
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, readTimeout)
		hs, err := client.inspect(rctx, g.prefix, names)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		now := time.Now()
		switch {
		case refusal(err) != "":
			return g.redisFailure("reading "+strings.Join(names, ", "), err)
		case err != nil:
			if msg := err.Error(); msg != failing {
				fmt.Fprintf(stderr, "tenure: %s reading %s: %v; reading again every %v\n", now.Format(stampFormat), strings.Join(names, ", "), err, interval)
				failing = msg
			}
		default:
			if failing != "" {
				fmt.Fprintf(stderr, "tenure: %s Redis answers again\n", now.Format(stampFormat))
				failing = ""
			}
			for _, h := range hs {
				h.setLimit(permits)
				st := h.holder()
				if prev, ok := last[h.Name]; ok && prev == st {
					continue
				}
				last[h.Name] = st
				if asJSON {
					err = enc.Encode(struct {
						Time time.Time `json:"time"`
						holding
					}{now, h})
				} else {
					_, err = fmt.Fprintf(out, "%s %s %s\n", now.Format(stampFormat), shown(h.Name), st)
				}
				if err != nil {
					return fail(exitError, "writing: %v", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// observeLeader prints the leader of name at once, then every change of
// leader, as package election's Observe reports them, until SIGINT or
// SIGTERM.
func observeLeader(g *globals, name string, out io.Writer) error {
	ctx, client, done, err := watchClient(g, "elect --observe")
	if client == nil {
		return err
	}
	defer done()
	// Without a Manager and an Identity an Election only observes.
	e, err := election.New(election.Config{Client: client.one(), KeyPrefix: g.prefix, Name: name})
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	// Observe reports nothing of errors (during an outage it waits): a
	// first read tells a user the server refuses from one it cannot
	// reach, which is worth an exit status of its own.
	if _, err := e.Leader(ctx); refusal(err) != "" {
		return g.redisFailure("observing "+strconv.Quote(name), err)
	}
	for rec := range e.Observe(ctx) {
		what := "no leader"
		if rec.Fence != 0 {
			what = fmt.Sprintf("leader %s (term %d)", shown(rec.Identity), rec.Fence)
		}
		if _, err := fmt.Fprintf(out, "%s %s %s\n", time.Now().Format(stampFormat), shown(name), what); err != nil {
			return fail(exitError, "writing: %v", err)
		}
	}
	return nil
}
