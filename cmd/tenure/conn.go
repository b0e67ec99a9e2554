package main

// Connecting: the flags that say how to reach Redis (--redis, the password,
// the TLS files), and the clients of the deployment they name, which must
// answer a PING (a majority of them, in quorum mode).

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/lease"
)

// The environment variables of the connection, besides REDIS_URL.
const (
	envPassword = "TENURE_REDIS_PASSWORD"
	envTLSCA    = "TENURE_TLS_CA"
	envTLSCert  = "TENURE_TLS_CERT"
	envTLSKey   = "TENURE_TLS_KEY"
)

// defaultRedis is the server when neither --redis nor REDIS_URL says one.
const defaultRedis = "redis://127.0.0.1:6379"

// connFlags are the global flags that say how to reach Redis.
type connFlags struct {
	redis        []string
	passwordFile string
	tlsCA        string
	tlsCert      string
	tlsKey       string
}

// redisForms is what --redis takes, for its usage and the root's help.
const redisForms = `a URL: redis://[user[:pass]@]host:port[/db] (rediss:// for TLS),
unix:///path.sock, or a bare host:port;
redis-sentinel://[user[:pass]@]host:port[,host:port...]/master-name[?db=N] for a
Sentinel group (rediss-sentinel:// for TLS), the addresses being the sentinels';
redis-cluster://[user[:pass]@]host:port[,host:port...] for a Cluster, given by
any of its nodes (rediss-cluster:// for TLS)`

// addConnFlags declares them. No flag's default is read from the
// environment: cobra prints defaults in --help, and REDIS_URL may hold a
// password.
func addConnFlags(cmd *cobra.Command, f *connFlags) {
	fl := cmd.PersistentFlags()
	fl.StringArrayVar(&f.redis, "redis", nil, "where Redis is: a redis://, redis-sentinel:// or redis-cluster:// URL, or host:port "+
		"(tenure help redis; default $REDIS_URL, else "+defaultRedis+"); a password here is visible to every user of the machine")
	fl.StringVar(&f.passwordFile, "redis-password-file", "", "read the Redis password from FILE's first line "+
		"(the user from the URL: redis://USER@host:port)")
	fl.StringVar(&f.tlsCA, "tls-ca", "", "PEM file of the authorities to trust, for rediss URLs (default $"+envTLSCA+", else the system's)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "PEM file of a client certificate (default $"+envTLSCert+"); needs --tls-key")
	fl.StringVar(&f.tlsKey, "tls-key", "", "PEM file of its private key (default $"+envTLSKey+")")
}

// orEnv is v, or the environment variable env when v is empty.
func orEnv(v, env string) string {
	if v != "" {
		return v
	}
	return os.Getenv(env)
}

// options turns the connection flags into targets, one per --redis (or
// $REDIS_URL, or the default: defaulted), and returns the secrets in them
// (the passwords) for redaction. Every error is a usage error: something
// given is wrong, or missing.
func (f *connFlags) options() (targets []*target, secrets []string, defaulted bool, err error) {
	urls := f.redis
	if len(urls) == 0 {
		u := os.Getenv("REDIS_URL")
		if u == "" {
			u, defaulted = defaultRedis, true
		}
		urls = []string{u}
	}
	if targets, secrets, err = parseTargets(urls); err != nil {
		return nil, secrets, false, err
	}
	password, err := f.password(targets)
	if password != "" {
		secrets = append(secrets, password)
	}
	if err != nil {
		return nil, secrets, false, err
	}
	if err := f.applyTLS(targets); err != nil {
		return nil, secrets, false, err
	}
	return targets, secrets, defaulted, nil
}

// parseTargets parses each --redis value, refusing one given twice, and
// returns the passwords they hold, to be hidden, even on error.
func parseTargets(urls []string) (targets []*target, secrets []string, err error) {
	seen := map[string]bool{}
	for _, u := range urls {
		t, err := parseTarget(u)
		if t != nil && t.password != "" {
			secrets = append(secrets, t.password)
		}
		if err != nil {
			return nil, secrets, err
		}
		if w := t.where(); seen[w] {
			return nil, secrets, fmt.Errorf("%s is given twice: quorum mode needs independent servers", w)
		}
		seen[t.where()] = true
		targets = append(targets, t)
	}
	return targets, secrets, nil
}

// password gives every target without a password of its own the one from
// --redis-password-file or $TENURE_REDIS_PASSWORD, and returns it; a URL
// with a password besides one of those, or a user without any, is an
// error.
func (f *connFlags) password(targets []*target) (string, error) {
	password, source := "", ""
	switch {
	case f.passwordFile != "":
		data, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return "", fmt.Errorf("--redis-password-file: %w", err)
		}
		line, _, _ := bytes.Cut(data, []byte("\n"))
		password, source = strings.TrimSuffix(string(line), "\r"), "--redis-password-file"
		if password == "" {
			return "", fmt.Errorf("--redis-password-file %s: the first line is empty", f.passwordFile)
		}
	case os.Getenv(envPassword) != "":
		password, source = os.Getenv(envPassword), "$"+envPassword
	}
	for _, t := range targets {
		if password != "" {
			if t.password != "" {
				return password, fmt.Errorf("two passwords: one in the Redis URL and one from %s; give one", source)
			}
			t.password = password
		}
		// go-redis would connect as the default user, without a word:
		// a user named with no password is a mistake. (A user with
		// nopass takes any password.)
		if t.user != "" && t.password == "" {
			return password, fmt.Errorf("the Redis URL names user %q but no password: give it in the URL "+
				"(USER:PASSWORD before the @, percent-encoded), in --redis-password-file FILE, or in $%s", t.user, envPassword)
		}
	}
	return password, nil
}

// applyTLS gives every rediss target the authorities and client
// certificate of --tls-ca, --tls-cert and --tls-key (or their variables).
func (f *connFlags) applyTLS(targets []*target) error {
	ca, cert, key := orEnv(f.tlsCA, envTLSCA), orEnv(f.tlsCert, envTLSCert), orEnv(f.tlsKey, envTLSKey)
	if ca == "" && cert == "" && key == "" {
		return nil
	}
	if !slices.ContainsFunc(targets, func(t *target) bool { return t.tls != nil }) {
		return errors.New("--tls-ca, --tls-cert and --tls-key (or their TENURE_TLS_* variables) need a rediss URL " +
			"(rediss://, rediss-sentinel:// or rediss-cluster://)")
	}
	if (cert == "") != (key == "") {
		return errors.New("--tls-cert and --tls-key go together: a client certificate needs its key")
	}
	var pool *x509.CertPool
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return fmt.Errorf("--tls-ca: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--tls-ca %s: no PEM certificate in it", ca)
		}
	}
	var pair tls.Certificate
	if cert != "" {
		var err error
		if pair, err = tls.LoadX509KeyPair(cert, key); err != nil {
			return fmt.Errorf("--tls-cert %s, --tls-key %s: %w", cert, key, err)
		}
	}
	for _, t := range targets {
		if t.tls == nil {
			continue
		}
		if pool != nil {
			t.tls.RootCAs = pool
		}
		if cert != "" {
			t.tls.Certificates = []tls.Certificate{pair}
		}
	}
	return nil
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
	"run --redisson": "a Redisson lock is one hash on one server (or Cluster), the one a Java service's Redisson reads; " +
		"give the --redis its Java services use",
	"status --redisson": "a Redisson lock is one hash on one server (or Cluster), the one a Java service's Redisson reads; " +
		"give the --redis its Java services use",
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
