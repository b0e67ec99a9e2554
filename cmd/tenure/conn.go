package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
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
const redisForms = `a URL: redis://[user[:pass]@]host:port[/db] (rediss:// for TLS), unix:///path.sock, or a bare host:port;
redis-sentinel://[user[:pass]@]host:port[,host:port...]/master-name[?db=N] for a
Sentinel group (rediss-sentinel:// for TLS), the addresses being the sentinels';
redis-cluster://[user[:pass]@]host:port[,host:port...] for a Cluster, given by any
of its nodes (rediss-cluster:// for TLS)`

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
