package main

// What one --redis value names: a server, a Sentinel group or a Cluster,
// parsed from its URL (or host:port), and its client.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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

// acceptedSchemes are the URL schemes of --redis, for messages.
const acceptedSchemes = "redis://, rediss:// (TLS), unix://, redis-sentinel://, rediss-sentinel://, redis-cluster://, rediss-cluster://"

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
	if err := t.parseAuthority(rest[:end], bad); err != nil {
		return nil, err
	}
	if err := t.parseTail(rest[end:], bad); err != nil {
		return nil, err
	}
	return t, nil
}

// badURL makes parseGroup's errors, which quote the URL only when it has
// no user information.
type badURL func(format string, args ...any) error

// parseAuthority reads a group URL's "[user[:pass]@]host:port[,host:port...]"
// into t: its user, password and addresses.
func (t *target) parseAuthority(authority string, bad badURL) error {
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		u, err := url.Parse("x://" + authority[:at+1] + "h")
		if err != nil || u.User == nil {
			return bad("the user information does not parse: a password must have its reserved characters " +
				"(@ : / %% # ? and space) percent-encoded")
		}
		t.user = u.User.Username()
		t.password, _ = u.User.Password()
		authority = authority[at+1:]
	}
	for _, a := range strings.Split(authority, ",") {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || strings.ContainsAny(host, " \t\r\n") {
			return bad("%q is not host:port (several go comma-separated)", a)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return bad("%q has no port from 1 to 65535", a)
		}
		t.addrs = append(t.addrs, a)
	}
	return nil
}

// parseTail reads what follows a group URL's hosts into t: a Sentinel
// group's /master-name and ?db=N; nothing at all for a Cluster.
func (t *target) parseTail(tail string, bad badURL) error {
	u, err := url.Parse("x://h" + tail)
	if err != nil {
		return bad("%v", errors.Unwrap(err))
	}
	if u.Fragment != "" || strings.Contains(tail, "#") {
		return bad("a fragment (#) means nothing here")
	}
	path := strings.Trim(u.Path, "/")
	q := u.Query()
	if t.kind == kindCluster {
		if path != "" || u.RawQuery != "" {
			return bad("a Cluster URL takes no path (a Cluster has database 0 only) and no query")
		}
		return nil
	}
	if strings.Contains(path, "/") {
		return bad("the path must be the master name that the sentinels monitor: /master-name")
	}
	// No path at all: the sentinels are asked which masters they
	// monitor (askSentinels), so that the message can name them.
	t.master = path
	for k, v := range q {
		if k != "db" || len(v) != 1 {
			return bad("the only query parameter is db=N, once")
		}
		if t.db, err = strconv.Atoi(v[0]); err != nil || t.db < 0 {
			return bad("db=%q is no database number", v[0])
		}
	}
	return nil
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

// parseRedis turns --redis into client options: a URL as go-redis's
// ParseURL reads it, or a bare host:port. Its errors never quote a URL
// that has user information: the parser's messages may quote part of it
// (an invalid escape in the password, say).
func parseRedis(s string) (*redis.Options, error) {
	if s == "" {
		return nil, errors.New("no Redis address: set --redis or REDIS_URL")
	}
	hidden := strings.Contains(s, "@")
	if !strings.Contains(s, "://") {
		if strings.ContainsAny(s, "/?#@ \t\r\n") || !strings.Contains(s, ":") {
			if hidden {
				return nil, errors.New("the Redis address (not shown: it holds an @, maybe a password) is neither a URL nor host:port")
			}
			return nil, fmt.Errorf("redis address %q is neither a URL nor host:port", s)
		}
		if err := checkPort(s); err != nil {
			return nil, fmt.Errorf("redis address %q: %w", s, err)
		}
		return &redis.Options{Addr: s}, nil
	}
	opts, err := redis.ParseURL(s)
	if err != nil {
		if hidden {
			return nil, errors.New("redis URL: it does not parse (not shown: it has user information); " +
				"a password must have its reserved characters (@ : / % # ? and space) percent-encoded")
		}
		if strings.Contains(err.Error(), "invalid URL scheme") {
			return nil, fmt.Errorf("redis URL: %w; the schemes tenure takes: %s (or a bare host:port)", err, acceptedSchemes)
		}
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	if opts.Network != "unix" {
		// go-redis takes any port, and the dial's "invalid port" read
		// as Redis unreachable (exit 69): it is the URL that is wrong.
		if err := checkPort(opts.Addr); err != nil {
			if hidden {
				return nil, fmt.Errorf("redis URL (not shown: it has user information): %w", err)
			}
			return nil, fmt.Errorf("redis URL %q: %w", s, err)
		}
	}
	return opts, nil
}

// checkPort checks that addr is host:port with a port from 1 to 65535.
func checkPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	return nil
}
