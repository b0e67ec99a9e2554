package main

// The kind of server a --redis URL reaches: a plain URL at a Cluster node
// worked for the names whose slots the node serves and failed with MOVED
// for the others; at a sentinel it failed on EVALSHA, quoting the script's
// arguments. Each is a URL of the wrong kind, which tenure says at once,
// with the URL to use, as a usage error.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server modes, as HELLO reports them.
const (
	modeStandalone = "standalone"
	modeCluster    = "cluster"
	modeSentinel   = "sentinel"
)

// kindError is a --redis URL of the wrong kind for what it reaches, or a
// Sentinel master name that the sentinels do not monitor: a usage error.
type kindError struct{ msg string }

func (e *kindError) Error() string { return e.msg }

func wrongKind(format string, args ...any) error {
	return &kindError{msg: fmt.Sprintf(format, args...)}
}

// reach checks that c, the client of t, reaches what t names: it asks the
// sentinels about the master first (a wrong name or sentinels down are
// then said at once, not after the client's retries), PINGs, and asks a
// single server or a Cluster seed that failed what it is.
func (t *target) reach(ctx context.Context, c redis.UniversalClient) error {
	if t.kind == kindSentinel {
		if err := t.askSentinels(ctx); err != nil {
			return err
		}
	}
	start := time.Now()
	accepted := false
	if t.kind == kindCluster {
		// As for one server (below): seeds that all refuse are said at
		// once, without the client's dial retries.
		if err := t.seedsRefuse(ctx); err != nil {
			return err
		}
	}
	if t.kind == kindServer {
		// One plain dial first: a refused connection is said at once,
		// where the client's own dial retries (go-redis's DialerRetries)
		// took most of a second; and a port that accepts tells a server
		// that never answers from one that cannot be reached.
		var err error
		if accepted, err = t.dialOnce(ctx); err != nil {
			return err
		}
	}
	err := c.Ping(ctx).Err()
	if what, ok := notRedis(err); ok {
		return wrongKind("%s is not a Redis server (it answered %s): check the --redis address", t.where(), what)
	}
	if err != nil && accepted && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no reply in %v: is this a Redis server? (it accepted the connection; "+
			"a Redis server that is paused or overloaded answers nothing either)", time.Since(start).Round(time.Second))
	}
	switch {
	case err != nil && t.kind == kindCluster:
		if kerr := t.askSeeds(ctx); kerr != nil {
			return kerr
		}
		return t.explainClosed(ctx, err)
	case err != nil:
		return t.explainClosed(ctx, err)
	case t.kind == kindServer:
		return t.checkServer(ctx, c)
	}
	return nil
}

// checkServer refuses a Cluster node or a sentinel given as one server.
func (t *target) checkServer(ctx context.Context, c redis.UniversalClient) error {
	addr := t.opts.Addr
	switch helloMode(ctx, c) {
	case modeCluster:
		return wrongKind("%s is a Cluster node: use %s://%s (any of its nodes, several comma-separated): "+
			"through one node alone only the names whose slots it serves would work", addr, t.scheme(kindCluster), addr)
	case modeSentinel:
		return wrongKind("%s is a sentinel, not a Redis server: use %s://%s/MASTER, MASTER being the name of the master it monitors%s",
			addr, t.scheme(kindSentinel), addr, monitored(ctx, c))
	}
	return nil
}

// scheme is the URL scheme of kind, with TLS as t has it.
func (t *target) scheme(kind string) string {
	s := "redis"
	if t.tls != nil {
		s = "rediss"
	}
	if kind != kindServer {
		s += "-" + kind
	}
	return s
}

// helloMode is the mode HELLO reports (modeStandalone, modeCluster,
// modeSentinel), or "" when the server does not say. HELLO needs no ACL
// rule, and without arguments it changes nothing on the connection.
func helloMode(ctx context.Context, c doer) string {
	v, err := c.Do(ctx, "hello").Result()
	if err != nil {
		return ""
	}
	m, _ := field(v, "mode").(string)
	return m
}

// field is key's value in a RESP3 map or a RESP2 flat array of pairs.
func field(v any, key string) any {
	switch v := v.(type) {
	case map[any]any:
		return v[key]
	case []any:
		for i := 0; i+1 < len(v); i += 2 {
			if k, _ := v[i].(string); k == key {
				return v[i+1]
			}
		}
	}
	return nil
}

// monitored says which masters the sentinel c monitors: `(it monitors
// "a", "b")`, or "" when it does not say.
func monitored(ctx context.Context, c doer) string {
	names := masterNames(ctx, c)
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf(" (it monitors %s)", strings.Join(names, ", "))
}

// masterNames are the names of the masters the sentinel c monitors,
// quoted; none when it does not answer.
func masterNames(ctx context.Context, c doer) []string {
	ms, err := c.Do(ctx, "sentinel", "masters").Slice()
	if err != nil {
		return nil
	}
	var names []string
	for _, m := range ms {
		if n, ok := field(m, "name").(string); ok {
			names = append(names, fmt.Sprintf("%q", n))
		}
	}
	return names
}

// probeTimeoutFor bounds the questions tenure asks the sentinels and the
// seeds itself: one dial and one round trip each. It is below connect's
// bound on the PING, so that the PING still has time after it.
const probeTimeoutFor = dialTimeout

// probe is a client of one address of t, without retries: a sentinel
// (reached without a password, as go-redis reaches them) or a Cluster
// seed (with the data nodes' user).
func (t *target) probe(addr string, auth bool) *redis.Client {
	o := &redis.Options{Addr: addr, TLSConfig: t.tls, DialTimeout: dialTimeout, ContextTimeoutEnabled: true,
		MaxRetries: -1, DialerRetries: 1, PoolSize: 1}
	if auth {
		o.Username, o.Password = t.user, t.password
	}
	return redis.NewClient(o)
}

// sentinelAnswer is what one sentinel address said of the master.
type sentinelAnswer struct {
	addr    string
	known   bool   // it monitors the master
	unknown bool   // it answered that it does not
	mode    string // it is no sentinel but this
	err     error  // no answer (or one that says nothing of the master)
	masters []string
}

// askSentinels asks every sentinel of t where the master is, at once. It
// returns nil when one knows it, or when an answer leaves it open (the
// client's PING then tells); a kindError when those that answered do not
// monitor the master, or are no sentinels; and, when none answered, an
// error naming each sentinel's failure.
func (t *target) askSentinels(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeoutFor)
	defer cancel()
	if t.master == "" {
		return t.noMaster(ctx)
	}
	answers := make([]sentinelAnswer, len(t.addrs))
	var wg sync.WaitGroup
	for i, addr := range t.addrs {
		wg.Go(func() {
			answers[i] = t.askSentinel(ctx, addr)
			if answers[i].known {
				cancel() // one is enough
			}
		})
	}
	wg.Wait()
	return t.judgeSentinels(answers)
}

func (t *target) askSentinel(ctx context.Context, addr string) sentinelAnswer {
	c := t.probe(addr, false)
	defer c.Close()
	a := sentinelAnswer{addr: addr}
	err := c.Do(ctx, "sentinel", "get-master-addr-by-name", t.master).Err()
	var re redis.Error
	switch {
	case err == nil:
		a.known = true
	case errors.Is(err, redis.Nil):
		a.unknown = true
		a.masters = masterNames(ctx, c)
	case errors.As(err, &re) && strings.Contains(err.Error(), "unknown command"):
		if a.mode = helloMode(ctx, c); a.mode == "" || a.mode == modeSentinel {
			a.mode, a.err = "", err
		}
	default:
		// A sentinel that refuses the client's certificate over TLS 1.3
		// may show as a reset (explainClosed says why): asked again, it
		// gives the refusal, so that every sentinel's refusal reads as one
		// (TestSentinelTLSCLI saw one reset beside two refusals, and
		// reported an outage).
		a.err = t.explainClosedAt(ctx, "tcp", addr, err)
	}
	return a
}

// judgeSentinels is askSentinels' verdict on the answers.
func (t *target) judgeSentinels(answers []sentinelAnswer) error {
	var unknown, masters, others, failed []string
	var errs []error
	for _, a := range answers {
		var re redis.Error
		switch {
		case a.known, a.err != nil && errors.As(a.err, &re):
			// It monitors the master; or it answered with an error
			// (NOAUTH, say) that leaves it open: the client decides.
			return nil
		case a.unknown:
			unknown = append(unknown, a.addr)
			for _, m := range a.masters {
				if !slices.Contains(masters, m) {
					masters = append(masters, m)
				}
			}
		case a.mode != "":
			others = append(others, t.notSentinel(a.addr, a.mode))
		default:
			failed = append(failed, fmt.Sprintf("%s: %v", a.addr, a.err))
			errs = append(errs, a.err)
		}
	}
	if len(unknown) > 0 {
		msg := fmt.Sprintf("the sentinels at %s answered, but monitor no master named %q", strings.Join(unknown, ","), t.master)
		if len(masters) > 0 {
			msg += fmt.Sprintf(" (they monitor %s)", strings.Join(masters, ", "))
		}
		return wrongKind("%s: the URL's path names the master, as in %s://HOST:PORT/MASTER%s",
			msg, t.scheme(kindSentinel), strings.Join(append([]string{""}, others...), "; "))
	}
	if len(others) > 0 {
		return wrongKind("%s", strings.Join(others, "; "))
	}
	return &noAnswer{what: "no sentinel answered", msgs: failed, errs: errs}
}

// notSentinel says that addr, given as a sentinel, is a server of mode.
func (t *target) notSentinel(addr, mode string) string {
	if mode == modeCluster {
		return fmt.Sprintf("%s is a Cluster node, not a sentinel: use %s://%s", addr, t.scheme(kindCluster), addr)
	}
	return fmt.Sprintf("%s is a Redis server, not a sentinel: use %s://%s", addr, t.scheme(kindServer), addr)
}

// noAnswer is every address of a target failing: their errors, each
// named by its address; errors.Is and errors.As see each of them.
type noAnswer struct {
	what string
	msgs []string
	errs []error
}

func (e *noAnswer) Error() string   { return e.what + ": " + strings.Join(e.msgs, "; ") }
func (e *noAnswer) Unwrap() []error { return e.errs }

// askSeeds asks the seeds of a Cluster whose PING failed what they are: a
// kindError when every seed that answers is a single server or a
// sentinel, else nil (the PING's error stands).
func (t *target) askSeeds(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeoutFor)
	defer cancel()
	modes := make([]string, len(t.addrs))
	var wg sync.WaitGroup
	for i, addr := range t.addrs {
		wg.Go(func() {
			c := t.probe(addr, true)
			defer c.Close()
			modes[i] = helloMode(ctx, c)
		})
	}
	wg.Wait()
	var others []string
	for i, m := range modes {
		switch m {
		case modeCluster:
			return nil
		case modeStandalone:
			others = append(others, fmt.Sprintf("%s is a single Redis server, not a Cluster node: use %s://%s",
				t.addrs[i], t.scheme(kindServer), t.addrs[i]))
		case modeSentinel:
			others = append(others, fmt.Sprintf("%s is a sentinel, not a Cluster node: use %s://%s/MASTER",
				t.addrs[i], t.scheme(kindSentinel), t.addrs[i]))
		}
	}
	if len(others) == 0 {
		return nil
	}
	return wrongKind("%s", strings.Join(others, "; "))
}

// doer sends a command of any name: every go-redis client.
type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// dialOnce dials t's server once, without TLS or retries: it returns a
// refused connection (or a missing Unix socket) as the error, and whether
// the dial was accepted; any other failure is left to the client's PING.
func (t *target) dialOnce(ctx context.Context) (accepted bool, err error) {
	network := t.opts.Network
	if network == "" {
		network = "tcp"
	}
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, network, t.opts.Addr)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return false, err
		}
		return false, nil
	}
	conn.Close()
	return true, nil
}

// notRedis reports whether err is a reply that no Redis server sends (go-
// redis could not parse it), and what it was: "HTTP" for a web server,
// else the start of the reply, quoted.
func notRedis(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	msg := err.Error()
	if !strings.Contains(msg, "can't parse") && !strings.Contains(msg, "invalid reply") {
		return "", false
	}
	reply := msg
	if i := strings.IndexByte(msg, '"'); i >= 0 {
		if s, err := strconv.Unquote(msg[i:]); err == nil {
			reply = s
		}
	}
	lower := strings.ToLower(strings.TrimSpace(reply))
	if strings.HasPrefix(lower, "http/") || strings.HasPrefix(lower, "<!doctype html") || strings.HasPrefix(lower, "<html") {
		return "HTTP", true
	}
	return fmt.Sprintf("%.40q", reply), true
}

// noMaster is the usage error of a Sentinel URL without a master name,
// naming the masters the sentinels monitor, as a redis:// URL at a
// sentinel does (checkServer).
func (t *target) noMaster(ctx context.Context) error {
	var names []string
	for _, addr := range t.addrs {
		c := t.probe(addr, false)
		for _, n := range masterNames(ctx, c) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		c.Close()
	}
	they := "the sentinels did not say which they monitor"
	if len(names) > 0 {
		they = "the sentinels monitor " + strings.Join(names, ", ")
	}
	return wrongKind("%s://%s has no master name: the path must be the master name that the sentinels monitor, "+
		"as in %s://%s/MASTER (%s)", t.scheme(kindSentinel), strings.Join(t.addrs, ","), t.scheme(kindSentinel),
		strings.Join(t.addrs, ","), they)
}

// seedsRefuse dials every Cluster seed of t once, at once, and returns
// their refusals joined when every one refused the connection; nil as soon
// as one accepts, or when one fails otherwise (the client's PING then
// tells what).
func (t *target) seedsRefuse(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	errs := make(chan error, len(t.addrs))
	for _, addr := range t.addrs {
		go func() {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", addr)
			if err == nil {
				conn.Close()
			}
			errs <- err
		}()
	}
	refused := &noAnswer{what: "every seed refused the connection"}
	for range t.addrs {
		err := <-errs
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
			return nil // the deferred cancel ends the other dials; errs is buffered
		}
		refused.msgs = append(refused.msgs, err.Error())
		refused.errs = append(refused.errs, err)
	}
	return refused
}
