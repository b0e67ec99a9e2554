//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// tracer records, per token, every command a manager's client sent that
// carries the token: when the client began and finished it, and what came
// back. A violation's section is printed with the trace of its token, which
// shows which request's answer moved its local deadline. It also counts
// acquire replies whose fence (the server's clock when it granted the name,
// or later) is older than the moment the client sent the request.
type tracer struct {
	mu     sync.Mutex
	events map[string][]traceEvent // token -> commands
	early  []string                // acquire replies older than their request
	// Commands a replica refused (READONLY): a client reached a server
	// that is not the primary.
	readonly []string
}

type traceEvent struct {
	client     int
	sent, done time.Time
	what       string
	reply      string
}

func newTracer() *tracer { return &tracer{events: map[string][]traceEvent{}} }

// hook returns the go-redis hook of client i.
func (tr *tracer) hook(i int) redis.Hook { return traceHook{tr: tr, client: i} }

type traceHook struct {
	tr     *tracer
	client int
}

func (h traceHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h traceHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		sent := time.Now()
		err := next(ctx, cmd)
		h.tr.note(h.client, sent, time.Now(), cmd)
		return err
	}
}

func (h traceHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		sent := time.Now()
		err := next(ctx, cmds)
		done := time.Now()
		for _, c := range cmds {
			h.tr.note(h.client, sent, done, c)
		}
		return err
	}
}

// isToken reports whether s looks like a token: 32 hex digits.
func isToken(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func (tr *tracer) note(client int, sent, done time.Time, cmd redis.Cmder) {
	args := cmd.Args()
	var tokens []string
	var keys []string
	for _, a := range args {
		var s string
		switch v := a.(type) {
		case string:
			s = v
		case *string:
			s = *v
		default:
			continue
		}
		if isToken(s) {
			tokens = append(tokens, s)
		} else if strings.HasPrefix(s, "tenure:") {
			keys = append(keys, s)
		}
	}
	if len(tokens) == 0 {
		return
	}
	var reply string
	var val any
	if err := cmd.Err(); err != nil {
		reply = "error: " + err.Error()
	} else if c, ok := cmd.(*redis.Cmd); ok {
		val = c.Val()
		reply = fmt.Sprintf("%v", val)
	} else {
		reply = cmd.String()
	}
	what := fmt.Sprintf("%s %s", cmd.Name(), strings.Join(keys, " "))
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if strings.Contains(reply, "READONLY") && len(tr.readonly) < 20 {
		tr.readonly = append(tr.readonly, fmt.Sprintf("client %d %s..%s %s -> %s", client, stamp(sent), stamp(done), what, reply))
	}
	for _, t := range tokens {
		tr.events[t] = append(tr.events[t], traceEvent{client: client, sent: sent, done: done, what: what, reply: reply})
	}
	if f := fenceOf(val); f > 1<<50 && len(keys) >= 2 && strings.HasSuffix(keys[1], ":fence") {
		if granted := time.UnixMicro(f); granted.Before(sent.Add(-anachronismSlack)) {
			tr.early = append(tr.early, fmt.Sprintf("client %d sent %s at %s, answered at %s with fence %d, the server's clock %v before the request",
				client, what, stamp(sent), stamp(done), f, sent.Sub(granted)))
		}
	}
}

// fenceOf returns the fence in an acquire reply, 0 if none.
func fenceOf(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case []any:
		if len(x) >= 2 {
			if ok, _ := x[0].(int64); ok == 1 {
				f, _ := x[1].(int64)
				return f
			}
		}
	}
	return 0
}

// trace prints what token's commands did, and the faults around them.
func (tr *tracer) trace(b *strings.Builder, token string, faults []Fault, sightings map[string][]Sighting) {
	tr.mu.Lock()
	evs := append([]traceEvent(nil), tr.events[token]...)
	tr.mu.Unlock()
	fmt.Fprintf(b, "  token %s:\n", token)
	var from, to time.Time
	for _, e := range evs {
		fmt.Fprintf(b, "    client %d %s..%s %s -> %s\n", e.client, stamp(e.sent), stamp(e.done), e.what, e.reply)
		if from.IsZero() || e.sent.Before(from) {
			from = e.sent
		}
		if e.done.After(to) {
			to = e.done
		}
	}
	for _, g := range sightings[token] {
		fmt.Fprintf(b, "    observer: seen %s..%s, expires %s, gone by %s\n", stamp(g.FirstSeen), stamp(g.LastSeen), stamp(g.ExpiresAt), stamp(g.GoneBy))
	}
	for _, f := range faults {
		if !f.Start.After(to.Add(time.Second)) && !f.End.Before(from.Add(-2*time.Second)) {
			fmt.Fprintf(b, "    fault %s %s..%s\n", f.Kind, stamp(f.Start), stamp(f.End))
		}
	}
}
