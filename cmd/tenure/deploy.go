package main

// Deployments: what one --redis value names (a server, a Sentinel group, a
// Cluster), and what several name (quorum mode, lease.NewQuorum).

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/semaphore"
)

// The kinds of deployment one --redis value names.
const (
	kindServer   = "server"
	kindSentinel = "sentinel"
	kindCluster  = "cluster"
)

// target is one --redis value, parsed.
type target struct {
	kind string
	// opts are a server's options (kindServer).
	opts *redis.Options
	// addrs are the sentinels' addresses (kindSentinel) or the Cluster's
	// seed nodes (kindCluster).
	addrs []string
	// master is the Sentinel group's master name; db its database.
	master string
	db     int
	// user and password authenticate to the data nodes; tls is nil
	// without TLS.
	user, password string
	tls            *tls.Config
}

// where names the target in messages, without its user information.
func (t *target) where() string {
	switch t.kind {
	case kindSentinel:
		return fmt.Sprintf("Sentinel master %q (sentinels %s)", t.master, strings.Join(t.addrs, ","))
	case kindCluster:
		return fmt.Sprintf("Redis Cluster (seeds %s)", strings.Join(t.addrs, ","))
	}
	return "redis at " + t.opts.Addr
}

// parseTarget parses one --redis value: a Sentinel or Cluster URL (below),
// or what parseRedis takes.
func parseTarget(s string) (*target, error) {
	scheme, _, _ := strings.Cut(s, "://")
	switch strings.ToLower(scheme) {
	case "redis-sentinel", "rediss-sentinel", "redis-cluster", "rediss-cluster":
		return parseGroup(s)
	}
	opts, err := parseRedis(s)
	if err != nil {
		return nil, err
	}
	return &target{kind: kindServer, opts: opts, user: opts.Username, password: opts.Password, tls: opts.TLSConfig}, nil
}

// parseGroup parses
//
//	redis-sentinel://[user[:pass]@]host:port[,host:port...]/master-name[?db=N]
//	redis-cluster://[user[:pass]@]host:port[,host:port...]
//
// and their rediss- forms (TLS). url.Parse refuses several hosts, so the
// host list is cut out first. As in parseRedis, an error never quotes a
// value that holds user information.
func parseGroup(s string) (*target, error) {
	scheme, rest, _ := strings.Cut(s, "://")
	scheme = strings.ToLower(scheme)
	t := &target{kind: kindSentinel}
	if strings.HasSuffix(scheme, "-cluster") {
		t.kind = kindCluster
	}
	if strings.HasPrefix(scheme, "rediss") {
		t.tls = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	hidden := strings.Contains(s, "@")
	bad := func(format string, args ...any) error {
		if hidden {
			return fmt.Errorf("redis %s URL (not shown: it has user information): %s", t.kind, fmt.Sprintf(format, args...))
		}
		return fmt.Errorf("redis %s URL %q: %s", t.kind, s, fmt.Sprintf(format, args...))
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		u, err := url.Parse("x://" + authority[:at+1] + "h")
		if err != nil || u.User == nil {
			return nil, bad("the user information does not parse: a password must have its reserved characters " +
				"(@ : / %% # ? and space) percent-encoded")
		}
		t.user = u.User.Username()
		t.password, _ = u.User.Password()
		authority = authority[at+1:]
	}
	for _, a := range strings.Split(authority, ",") {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || strings.ContainsAny(host, " \t\r\n") {
			return nil, bad("%q is not host:port (several go comma-separated)", a)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, bad("%q has no port from 1 to 65535", a)
		}
		t.addrs = append(t.addrs, a)
	}
	u, err := url.Parse("x://h" + tail)
	if err != nil {
		return nil, bad("%v", errors.Unwrap(err))
	}
	if u.Fragment != "" || strings.Contains(tail, "#") {
		return nil, bad("a fragment (#) means nothing here")
	}
	path := strings.Trim(u.Path, "/")
	q := u.Query()
	if t.kind == kindCluster {
		if path != "" || u.RawQuery != "" {
			return nil, bad("a Cluster URL takes no path (a Cluster has database 0 only) and no query")
		}
		return t, nil
	}
	if path == "" || strings.Contains(path, "/") {
		return nil, bad("the path must be the master name that the sentinels monitor: /master-name")
	}
	t.master = path
	for k, v := range q {
		if k != "db" || len(v) != 1 {
			return nil, bad("the only query parameter is db=N, once")
		}
		if t.db, err = strconv.Atoi(v[0]); err != nil || t.db < 0 {
			return nil, bad("db=%q is no database number", v[0])
		}
	}
	return t, nil
}

// Timeouts of every client: a dial gives up within dialTimeout, and every
// call carries its own context deadline.
const dialTimeout = 3 * time.Second

// client makes the target's client.
func (t *target) client() redis.UniversalClient {
	switch t.kind {
	case kindSentinel:
		// TLSConfig serves the sentinels and the data nodes alike; its
		// ServerName stays empty, so that each connection checks the
		// certificate against the address it dials.
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: t.master, SentinelAddrs: t.addrs, DB: t.db,
			Username: t.user, Password: t.password, TLSConfig: t.tls,
			ContextTimeoutEnabled: true, DialTimeout: dialTimeout, MaxRetries: 1,
		})
	case kindCluster:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: t.addrs, Username: t.user, Password: t.password, TLSConfig: t.tls,
			ContextTimeoutEnabled: true, DialTimeout: dialTimeout, MaxRetries: 1,
		})
	}
	opts := *t.opts
	opts.Username, opts.Password, opts.TLSConfig = t.user, t.password, t.tls
	opts.ContextTimeoutEnabled = true
	opts.DialTimeout = dialTimeout
	opts.MaxRetries = 1
	return redis.NewClient(&opts)
}

// node is one client: the deployment's only one, or one quorum node.
type node struct {
	c     redis.UniversalClient
	where string
}

// conns are the clients of the deployment --redis names: one for a
// server, a Sentinel group or a Cluster; one per node in quorum mode.
type conns struct {
	nodes []node
}

func (cs *conns) Close() error {
	var errs []error
	for _, n := range cs.nodes {
		errs = append(errs, n.c.Close())
	}
	return errors.Join(errs...)
}

// quorum reports whether there are several nodes (lease.NewQuorum).
func (cs *conns) quorum() bool { return len(cs.nodes) > 1 }

func (cs *conns) majority() int { return len(cs.nodes)/2 + 1 }

// one is the client of a deployment that is not a quorum.
func (cs *conns) one() redis.UniversalClient { return cs.nodes[0].c }

// newManager is lease.New, or lease.NewQuorum over every node.
func (cs *conns) newManager(opts ...lease.Option) (*lease.Manager, error) {
	if !cs.quorum() {
		return lease.New(cs.one(), opts...)
	}
	clients := make([]redis.UniversalClient, len(cs.nodes))
	for i, n := range cs.nodes {
		clients[i] = n.c
	}
	return lease.NewQuorum(clients, opts...)
}

// connect returns the clients of --redis, which answered a PING (in
// quorum mode, a majority of the nodes did).
func (g *globals) connect(ctx context.Context) (*conns, error) { return g.connectFor(ctx, "") }

// connectFor is connect for a feature that quorum mode lacks ("" for
// none): with several --redis it is a usage error.
func (g *globals) connectFor(ctx context.Context, feature string) (*conns, error) {
	targets, secrets, defaulted, err := g.conn.options()
	g.stderr.add(secrets...)
	if err != nil {
		return nil, fail(exitUsage, "%v", err)
	}
	if feature != "" && len(targets) > 1 {
		return nil, fail(exitUsage, "%s is not supported in quorum mode (several --redis): %s", feature, quorumLacks[feature])
	}
	g.user = targets[0].user
	if err := checkPrefix(g.prefix); err != nil {
		return nil, fail(exitUsage, "%v", err)
	}
	cs := &conns{}
	for _, t := range targets {
		cs.nodes = append(cs.nodes, node{c: t.client(), where: t.where()})
	}
	if len(targets) > 1 {
		for i := range cs.nodes {
			cs.nodes[i].where = fmt.Sprintf("quorum node %d of %d (%s)", i+1, len(targets), cs.nodes[i].where)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	errs := cs.each(pctx, func(ctx context.Context, i int, c redis.UniversalClient) error { return targets[i].reach(ctx, c) })
	answered, failed := 0, []string{}
	for i, err := range errs {
		var ke *kindError
		switch {
		case err == nil:
			answered++
		case errors.As(err, &ke):
			cs.Close()
			return nil, fail(exitUsage, "%s", ke)
		case refusal(err) != "":
			cs.Close()
			return nil, g.redisFailure(cs.nodes[i].where, err)
		default:
			failed = append(failed, unreachable(cs.nodes[i].where, err, targets[i], defaulted))
		}
	}
	if answered < cs.majority() {
		cs.Close()
		if !cs.quorum() {
			return nil, fail(exitRedis, "%s", failed[0])
		}
		return nil, fail(exitRedis, "quorum mode: %d of %d nodes answered, a majority is %d: %s",
			answered, len(cs.nodes), cs.majority(), strings.Join(failed, "; "))
	}
	for _, f := range failed {
		fmt.Fprintf(g.stderr, "tenure: %s; going on with the %d of %d nodes that answered\n", f, answered, len(cs.nodes))
	}
	return cs, nil
}

// unreachable says that the target t, named where, did not answer (err),
// with a hint when the default address was tried or the server closed
// the connection at once.
func unreachable(where string, err error, t *target, defaulted bool) string {
	msg := fmt.Sprintf("%s: %v", where, err)
	if defaulted && errors.Is(err, syscall.ECONNREFUSED) {
		msg += "; no --redis and no REDIS_URL were given, so tenure tried the default, " + defaultRedis +
			": set --redis or REDIS_URL to your Redis"
	}
	if t.tls == nil && closedAtOnce(err) {
		msg += " (the server closed the connection at once: if it speaks TLS only, use a rediss URL: " +
			"rediss://, rediss-sentinel:// or rediss-cluster://)"
	}
	return msg
}

// closedAtOnce reports whether err is a server closing a connection it
// never answered on, as a TLS-only server does to a client that speaks
// plain RESP.
func closedAtOnce(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
		strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "connection reset by peer")
}

// quorumLacks says why quorum mode lacks a feature.
var quorumLacks = map[string]string{
	"elect --observe": "the election's leader record is written in a transaction guarded by the lease (Lease.Exec), " +
		"which cannot span independent servers; a quorum elect leads by the lease alone, whose holder status shows",
	"run -n (permits)": "the library keeps no semaphore over independent servers",
}

// each calls f on every node at once and returns the errors, by node.
func (cs *conns) each(ctx context.Context, f func(ctx context.Context, i int, c redis.UniversalClient) error) []error {
	errs := make([]error, len(cs.nodes))
	var wg sync.WaitGroup
	for i, n := range cs.nodes {
		wg.Go(func() { errs[i] = f(ctx, i, n.c) })
	}
	wg.Wait()
	return errs
}

// scanNames is scanNames over every Cluster primary (ForEachMaster) and
// every quorum node: the union of the names found.
func (cs *conns) scanNames(ctx context.Context, prefix, pattern string) ([]string, error) {
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	scan := func(ctx context.Context, c redis.UniversalClient) error {
		names, err := scanNames(ctx, c, prefix, pattern)
		mu.Lock()
		for _, n := range names {
			seen[n] = true
		}
		mu.Unlock()
		return err
	}
	errs := cs.each(ctx, func(ctx context.Context, _ int, c redis.UniversalClient) error {
		return scan(ctx, c) // on a Cluster, every primary's
	})
	if err := cs.enough(errs); err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// enough is nil when a majority of the nodes succeeded (every node, out
// of quorum mode), else the first error: a refusal before any other.
func (cs *conns) enough(errs []error) error {
	ok := 0
	var first error
	for i, err := range errs {
		if err == nil {
			ok++
			continue
		}
		if cs.quorum() {
			err = fmt.Errorf("%s: %w", cs.nodes[i].where, err)
		}
		if first == nil || (refusal(err) != "" && refusal(first) == "") {
			first = err
		}
	}
	if ok >= cs.majority() && (cs.quorum() || first == nil) {
		return nil
	}
	return first
}

// nodeView is one quorum node's view of a name, as status shows it.
type nodeView struct {
	Node   string `json:"node"`
	Kind   string `json:"kind,omitempty"`
	TTLms  int64  `json:"ttl_ms"`
	Fence  int64  `json:"fence"`
	Holder string `json:"holder,omitempty"`
	Error  string `json:"error,omitempty"`
}

func (v nodeView) text() string {
	if v.Error != "" {
		return fmt.Sprintf("%s: no answer: %s", v.Node, v.Error)
	}
	h := holding{Kind: v.Kind, TTLms: v.TTLms}
	s := fmt.Sprintf("%s: %s, ttl %s, fence %d", v.Node, v.Kind, h.ttl(), v.Fence)
	if v.Holder != "" {
		s += ", holder " + shown(v.Holder)
	}
	return s
}

// inspect reads names: out of quorum mode, as inspect does; in quorum
// mode from every node, each name then showing the majority's view (a
// lease whose token a majority holds: its largest fence and its shortest
// TTL; else free, with the largest fence of any node) and, in Nodes, each
// node's own.
func (cs *conns) inspect(ctx context.Context, prefix string, names []string) ([]holding, error) {
	if !cs.quorum() {
		return inspect(ctx, cs.one(), prefix, names)
	}
	views := make([][]holding, len(cs.nodes))
	errs := cs.each(ctx, func(ctx context.Context, i int, c redis.UniversalClient) error {
		hs, err := inspect(ctx, c, prefix, names)
		views[i] = hs
		return err
	})
	if err := cs.enough(errs); err != nil {
		return nil, err
	}
	out := make([]holding, len(names))
	for i, name := range names {
		counts := map[string]int{}
		for _, v := range views {
			if v != nil {
				counts[v[i].agreement()]++
			}
		}
		agreed := ""
		for k, c := range counts {
			if c >= cs.majority() {
				agreed = k
			}
		}
		h := holding{Name: name, Kind: "free"}
		var agreeing []holding
		for j, v := range views {
			if v == nil {
				h.Nodes = append(h.Nodes, nodeView{Node: cs.nodes[j].where, Error: oneLine(errs[j].Error())})
				continue
			}
			nh := v[i]
			h.Nodes = append(h.Nodes, nodeView{Node: cs.nodes[j].where, Kind: nh.Kind, TTLms: nh.TTLms, Fence: nh.Fence, Holder: nh.Holder})
			h.Fence = max(h.Fence, nh.Fence)
			if agreed != "" && agreed != "free" && nh.agreement() == agreed {
				agreeing = append(agreeing, nh)
			}
		}
		if len(agreeing) > 0 {
			nodes := h.Nodes
			h = agreeing[0]
			h.Nodes = nodes
			for _, a := range agreeing[1:] {
				h.Fence = max(h.Fence, a.Fence)
				if a.TTLms >= 0 && (h.TTLms < 0 || a.TTLms < h.TTLms) {
					h.TTLms = a.TTLms
				}
			}
		}
		out[i] = h
	}
	return out, nil
}

// agreement is what quorum nodes must share to hold a name alike: its kind
// and, for a lease, its token.
func (h holding) agreement() string {
	if h.Kind == "lease" {
		return "lease\x00" + h.id
	}
	return h.Kind
}

// connectWaiting is connectFor that waits out a Redis that does not
// answer, as a wait for a held name waits out a restart: while the
// connection fails as unreachable (exit 69: not a refusal, nor a usage
// error) it says so once on stderr (with wait, the --wait given) and tries
// again with the backoff of retrying, until wctx, which bounds the wait,
// ends; then the last failure stands, saying that the wait ran out.
func (g *globals) connectWaiting(wctx context.Context, feature, wait string) (*conns, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 100*time.Millisecond, 2*time.Second, 0
	said := false
	for {
		cs, err := g.connectFor(wctx, feature)
		var xe *exitErr
		if err == nil || !errors.As(err, &xe) || xe.code != exitRedis {
			return cs, err
		}
		if !said {
			fmt.Fprintf(g.stderr, "tenure: %s; waiting for it (--wait %s)\n", oneLine(xe.Error()), wait)
			said = true
		}
		pause := b.NextBackOff()
		g.log.Warn("Redis unreachable; trying again", "err", xe.err, "after", pause)
		t := time.NewTimer(pause)
		select {
		case <-wctx.Done():
			t.Stop()
			return nil, fail(exitRedis, "%v; still unreachable when --wait %s ran out", xe.err, wait)
		case <-t.C:
		}
	}
}

// retrying is take(ctx, true) that outlives a Redis outage, as the
// election's campaign does: an attempt that fails on Redis (a restart, a
// failover, a dropped connection) is tried again with a growing pause
// (100ms doubling up to 2s) until ctx, which bounds the wait, ends; then
// the last failure is returned. A refusal or anything else is returned at
// once.
func (g *globals) retrying(ctx context.Context, take func(context.Context, bool) (*lease.Lease, error)) (*lease.Lease, error) {
	// The library's backoff (lease waits with it too): from 100ms,
	// doubling with jitter, up to 2s a pause, for as long as ctx allows.
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 100*time.Millisecond, 2*time.Second, 0
	for {
		l, err := take(ctx, true)
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return l, err
		}
		pause := b.NextBackOff()
		g.log.Warn("Redis failed while waiting; trying again", "err", err, "after", pause)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (Redis was failing when the wait ended)", err)
		case <-t.C:
		}
	}
}

// retryable reports whether err, from a waiting acquisition, is Redis
// failing, which a retry may mend.
func retryable(err error) bool {
	for _, e := range []error{lease.ErrNotAcquired, lease.ErrInvalidOption, lease.ErrInvalidName, lease.ErrClosed, errors.ErrUnsupported,
		semaphore.ErrLimitMismatch} {
		if errors.Is(err, e) {
			return false
		}
	}
	return refusal(err) == ""
}

// runFeature is the feature connectFor checks for "run": permits (-n)
// and read locks (--shared), which quorum mode lacks; none otherwise.
func runFeature(permits int, shared bool) string {
	switch {
	case permits > 0:
		return "run -n (permits)"
	case shared:
		return "run --shared (read locks are permits)"
	}
	return ""
}

// ping is PING on every node, for a loss message's cause: the first
// error, or nil when every node answered.
func (cs *conns) ping(ctx context.Context) error {
	for _, err := range cs.each(ctx, func(ctx context.Context, _ int, c redis.UniversalClient) error {
		return c.Ping(ctx).Err()
	}) {
		if err != nil {
			return err
		}
	}
	return nil
}
