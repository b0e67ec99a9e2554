package main

// Security through the built binary: every command as a least-privilege ACL
// user, refusals (exit 78), secrets never printed, and TLS.

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/tests/redistest"
)

// on returns the command for the built binary with exactly env added to
// tenure's environment, REDIS_URL and the TENURE_ variables of the test's
// own environment left out.
func on(env []string, args ...string) *exec.Cmd {
	c := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDIS_URL=") && !strings.HasPrefix(kv, "TENURE_") {
			c.Env = append(c.Env, kv)
		}
	}
	c.Env = append(c.Env, env...)
	return c
}

// userURL is the URL of s for user without a password.
func userURL(s *redistest.Server, user string) string {
	scheme, rest, _ := strings.Cut(s.URL(), "://")
	return scheme + "://" + user + "@" + rest
}

// delUsers deletes ACL users of s at the end of the test.
func delUsers(t *testing.T, s *redistest.Server, users ...string) {
	t.Cleanup(func() {
		c := s.NewClient()
		defer c.Close()
		args := []any{"acl", "deluser"}
		for _, u := range users {
			args = append(args, u)
		}
		_ = c.Do(context.Background(), args...).Err()
	})
}

// clientsSubscribed counts the server's connections subscribed to a channel.
func clientsSubscribed(t *testing.T, s *redistest.Server) int {
	t.Helper()
	c := s.NewClient()
	defer c.Close()
	list, err := c.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(regexp.MustCompile(`(?m) sub=[1-9]`).FindAllString(list, -1))
}

// everyFeature runs each subcommand of tenure against s through env (a
// user, a password source, TLS files), as a user would: run, run -n,
// waiting by pub/sub, elect, status (and -n, --json, --watch), list,
// elect --observe, release --force of a lease and of a semaphore. It
// fails the test on any status but the expected one, and returns every
// stderr written.
func everyFeature(t *testing.T, s *redistest.Server, env []string, tag string) string {
	t.Helper()
	f := &featureRun{t: t, env: env}
	dir := t.TempDir()
	lease, sem, waited := tag+"-lease", tag+"-sem", tag+"-waited"
	f.check(0, "run", "--ttl", "2s", lease, "--", "true")
	f.check(0, "run", "-n", "2", "--ttl", "2s", sem, "--", "true")
	f.check(0, "elect", "--ttl", "2s", "--identity", "e1", tag+"-elect", "--", "true")
	f.waiting(s, waited, dir)
	f.operators(tag, lease, sem, dir)
	return f.all.String()
}

// featureRun is what everyFeature's steps share: the environment tenure
// runs with, and every stderr written.
type featureRun struct {
	t   *testing.T
	env []string
	all strings.Builder
}

// check runs tenure with args, fails the test unless it exits with want,
// and returns its stdout.
func (f *featureRun) check(want int, args ...string) string {
	f.t.Helper()
	code, out, stderr := result(f.t, on(f.env, args...))
	f.all.WriteString(stderr)
	if code != want {
		f.t.Fatalf("%v: status %d, want %d; stderr: %s", args, code, want, stderr)
	}
	return out
}

// waiting runs two runs of waited on s, the second waiting for the first.
func (f *featureRun) waiting(s *redistest.Server, waited, dir string) {
	t := f.t
	t.Helper()
	// Waiting: the second run waits on the manager's pub/sub connection
	// and is woken by the first's release.
	ready, gate := filepath.Join(dir, "ready"), filepath.Join(dir, "gate")
	holdCmd := `echo up >> "$1"; while [ ! -e "$2" ]; do sleep 0.02; done`
	first := on(f.env, "run", "--ttl", "30s", waited, "--", "sh", "-c", holdCmd, "sh", ready, gate)
	startBackground(t, first)
	waitFile(t, ready, 1, 30*time.Second)
	subs := clientsSubscribed(t, s)
	second := on(f.env, "run", "--ttl", "30s", waited, "--", "sh", "-c", `echo up >> "$1"`, "sh", ready)
	var secondErr bytes.Buffer
	second.Stderr = &secondErr
	startBackground(t, second)
	for deadline := time.Now().Add(30 * time.Second); clientsSubscribed(t, s) <= subs; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the waiting run never subscribed")
		}
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, first, 30*time.Second); code != 0 {
		t.Fatalf("the first holder exited %d", code)
	}
	if code := exitOf(t, second, 60*time.Second); code != 0 {
		t.Fatalf("the waiting run exited %d: %s", code, secondErr.String())
	}
	f.all.WriteString(secondErr.String())
	waitFile(t, ready, 2, time.Second)
}

// operators runs status, list, status --watch, elect --observe and
// release --force against holders of lease and of two permits of sem.
func (f *featureRun) operators(tag, lease, sem, dir string) {
	t := f.t
	t.Helper()
	// Holders for the operator commands: a lease and two permits.
	held := filepath.Join(dir, "held")
	loop := `echo up >> "$1"; while :; do sleep 0.05; done`
	var holders []*exec.Cmd
	var holderErr []*bytes.Buffer
	for _, args := range [][]string{
		{"run", "--ttl", "2s", "--holder", "h-lease", lease},
		{"run", "-n", "3", "--ttl", "2s", "--holder", "h-sem-1", sem},
		{"run", "-n", "3", "--ttl", "2s", "--holder", "h-sem-2", sem},
	} {
		c := on(f.env, append(args, "--", "sh", "-c", loop, "sh", held)...)
		var b bytes.Buffer
		c.Stderr = &b
		startBackground(t, c)
		holders, holderErr = append(holders, c), append(holderErr, &b)
	}
	waitFile(t, held, 3, 30*time.Second)
	if out := f.check(0, "status", "-n", "3", sem); !strings.Contains(out, "2 held, 1 of -n 3 free") {
		t.Errorf("status -n 3 %s:\n%s", sem, out)
	}
	if out := f.check(0, "status", "--json", lease); !strings.Contains(out, `"holder": "h-lease"`) {
		t.Errorf("status --json %s:\n%s", lease, out)
	}
	var hs []holding
	if out := f.check(0, "list", "--json", tag+"-*"); json.Unmarshal([]byte(out), &hs) != nil || len(hs) != 2 {
		t.Errorf("list --json %s-*: %s", tag, out)
	}
	// status --watch and elect --observe print their first line, and end
	// with status 0 on SIGINT.
	for _, args := range [][]string{{"status", "--watch", lease, sem}, {"elect", "--observe", tag + "-elect"}} {
		wt := startWatching(t, on(f.env, args...))
		if line := wt.next(t); !strings.HasPrefix(line, tag+"-") {
			t.Errorf("%v printed %q", args, line)
		}
		_ = wt.cmd.Process.Signal(syscall.SIGINT)
		if code := exitOf(t, wt.cmd, 30*time.Second); code != 0 {
			t.Errorf("%v exited %d on SIGINT: %s", args, code, wt.stderr.String())
		}
		f.all.WriteString(wt.stderr.String())
	}
	if out := f.check(0, "release", "--force", lease); !strings.Contains(out, "revoked the lease") {
		t.Errorf("release --force %s: %s", lease, out)
	}
	if out := f.check(0, "release", "--force", sem); !strings.Contains(out, "revoked the 2 permits") {
		t.Errorf("release --force %s: %s", sem, out)
	}
	for i, h := range holders {
		if code := exitOf(t, h, 30*time.Second); code != exitLost {
			t.Errorf("holder %d exited %d after release --force, want %d: %s", i, code, exitLost, holderErr[i].String())
		}
		f.all.WriteString(holderErr[i].String())
	}
	// The holders confirmed their revocations (release_revoked.lua) as
	// this user too: both names are free, well before their TTLs.
	f.check(1, "status", "--check", lease)
	f.check(1, "status", "--check", sem)
}

// TestACLUserCLI: every subcommand as docs/security.md's user (the rule
// redistest.CreateUser sets, which TestACLRuleMatchesDocs keeps equal to
// the document's), with its password from $TENURE_REDIS_PASSWORD, from
// --redis-password-file and in the URL. The server's ACL LOG records no
// refusal, nothing says NOPERM, and no script of the CLI touches a key it
// was not given.
func TestACLUserCLI(t *testing.T) {
	ctx := context.Background()
	u := srv.CreateUser(t, "tenure-cli", "tenure:")
	delUsers(t, srv, u.Name)
	srv.ResetACLLog(t)
	mon := srv.Monitor(t)
	stderr := everyFeature(t, srv, []string{"REDIS_URL=" + userURL(srv, u.Name), "TENURE_REDIS_PASSWORD=" + u.Password}, "acl")

	file := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(file, []byte(u.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, env := range [][]string{
		{"REDIS_URL=" + userURL(srv, u.Name)},
		{"REDIS_URL=" + strings.Replace(userURL(srv, u.Name), "@", ":"+u.Password+"@", 1)},
	} {
		args := []string{"run", "acl-sources", "--", "true"}
		if !strings.Contains(env[0], u.Password) {
			args = append([]string{"--redis-password-file", file}, args...)
		}
		code, _, e := result(t, on(env, args...))
		if code != 0 {
			t.Errorf("%v: status %d: %s", args, code, e)
		}
		stderr += e
	}
	// A database above 0 (SELECT on every connection): the rule allows it.
	db2 := strings.Replace(userURL(srv, u.Name), "@", ":"+u.Password+"@", 1) + "/2"
	code, _, e := result(t, on([]string{"REDIS_URL=" + db2}, "run", "acl-db2", "--", "true"))
	if code != 0 {
		t.Errorf("run in database 2: status %d: %s", code, e)
	}
	stderr += e
	admin2 := redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: 2})
	defer admin2.Close()
	if n := admin2.Exists(ctx, "tenure:{acl-db2}:fence").Val(); n != 1 {
		t.Error("run in database 2 left no fence counter there")
	}
	cmds := mon.Stop(t)
	checkACLClean(t, cmds, stderr)
}

// TestRefusals: a user without the rights tenure needs, or with a wrong
// password, gets exit status 78 (not 69, "unreachable") and a message
// naming what was refused.
func TestRefusals(t *testing.T) {
	const user, pw = "tenure-narrow", "narrow-pw-1234"
	// Scripts may run, but not SET (acquire.lua's); no TYPE (status, which
	// reads in one MULTI/EXEC: the refusal is TYPE's, not EXECABORT), no
	// SCAN (list).
	srv.SetUser(t, user, "on", ">"+pw, "~tenure:*", "&tenure:*", "+ping", "+evalsha", "+eval", "+time", "+get", "+exists",
		"+pttl", "+del", "+hgetall", "+hmget", "+zcard", "+zrange", "+subscribe", "+publish", "+multi", "+exec")
	delUsers(t, srv, user, "tenure-keyless", "tenure-nomulti")
	srv.SetUser(t, "tenure-keyless", "on", ">"+pw, "~other:*", "+@all")
	// The same without MULTI, which elections read the leader in.
	srv.SetUser(t, "tenure-nomulti", "on", ">"+pw, "~tenure:*", "&tenure:*", "+ping", "+evalsha", "+eval", "+time", "+get",
		"+exists", "+pttl", "+del", "+hgetall", "+hmget", "+zcard", "+zrange", "+subscribe", "+publish", "+exec")
	withPW := func(u, p string) []string {
		return []string{"REDIS_URL=" + userURL(srv, u), "TENURE_REDIS_PASSWORD=" + p}
	}
	for _, tc := range []struct {
		what string
		env  []string
		args []string
		want []string
	}{
		{"run: a script's command refused", withPW(user, pw), []string{"run", "narrow", "--", "true"},
			// Redis 7.0: "can't run this command"; 7.2+ and Valkey: "has no
			// permissions to run the 'set' command".
			[]string{`acquiring "narrow": Redis refused user "tenure-narrow" a command called by tenure's script`, "can't run this command | 'set' command"}},
		{"run -n: a script's command refused", withPW(user, pw), []string{"run", "-n", "2", "narrow", "--", "true"},
			[]string{`acquiring a permit of "narrow" (-n 2): Redis refused user "tenure-narrow" a command called by tenure's script`}},
		{"elect: a script's command refused", withPW(user, pw), []string{"elect", "narrow", "--", "true"},
			[]string{`campaigning for "narrow": Redis refused user "tenure-narrow"`}},
		{"status: a command refused", withPW(user, pw), []string{"status", "narrow"},
			[]string{`reading "narrow": Redis refused user "tenure-narrow" a command: NOPERM`, "'type' command", "docs/security.md"}},
		{"list: a command refused", withPW(user, pw), []string{"list"},
			[]string{`scanning: Redis refused user "tenure-narrow" a command: NOPERM`, "'scan' command"}},
		{"release: a script's command refused", withPW(user, pw), []string{"release", "--force", "narrow"},
			[]string{`releasing "narrow" (the release --force script): Redis refused user "tenure-narrow"`}},
		{"status: a key refused", withPW("tenure-keyless", pw), []string{"status", "narrow"},
			[]string{`Redis refused user "tenure-keyless" a command: NOPERM`, "key"}},
		{"wrong password", withPW(user, "wrong-pw-5678"), []string{"run", "narrow", "--", "true"},
			[]string{`Redis refused to authenticate user "tenure-narrow": WRONGPASS`}},
		{"no such user", withPW("nobody-here", pw), []string{"status", "narrow"},
			[]string{`Redis refused to authenticate user "nobody-here": WRONGPASS`}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			code, _, stderr := result(t, on(tc.env, tc.args...))
			if code != exitRefused {
				t.Errorf("status %d, want %d; stderr: %s", code, exitRefused, stderr)
			}
			for _, w := range tc.want {
				// "a | b": either, as servers word it.
				if !slices.ContainsFunc(strings.Split(w, " | "), func(w string) bool { return strings.Contains(stderr, w) }) {
					t.Errorf("stderr lacks %q: %s", w, stderr)
				}
			}
			if n := strings.Count(stderr, "\n"); n != 1 {
				t.Errorf("stderr has %d lines, want one: %q", n, stderr)
			}
		})
	}
	checkWatchRefused(t, withPW(user, pw), withPW("tenure-nomulti", pw))
}

// TestSecretsNotPrinted: tenure never prints the password, whatever
// fails: a wrong one, an unreachable host, a URL that does not parse, -vv,
// --help with the password in $REDIS_URL; and the command it runs does not
// get $TENURE_REDIS_PASSWORD.
func TestSecretsNotPrinted(t *testing.T) {
	const user, pw = "tenure-secret", "Sup3r-s3cret-pw"
	u := srv.CreateUser(t, user, "tenure:")
	delUsers(t, srv, u.Name)
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte(pw+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := strings.Replace(userURL(srv, user), "@", ":"+u.Password+"@", 1)
	wrong := strings.Replace(userURL(srv, user), "@", ":"+pw+"@", 1)
	for _, tc := range []struct {
		what string
		env  []string
		args []string
		want int
	}{
		{"wrong password in the URL", nil, []string{"--redis", wrong, "status", "x"}, exitRefused},
		{"wrong password, -vv", nil, []string{"-vv", "--redis", wrong, "run", "x", "--", "true"}, exitRefused},
		{"wrong password in REDIS_URL", []string{"REDIS_URL=" + wrong}, []string{"list"}, exitRefused},
		{"wrong password from the environment", []string{"REDIS_URL=" + userURL(srv, user), "TENURE_REDIS_PASSWORD=" + pw}, []string{"status", "x"}, exitRefused},
		{"wrong password from a file", []string{"REDIS_URL=" + userURL(srv, user)}, []string{"--redis-password-file", file, "status", "x"}, exitRefused},
		{"unreachable", nil, []string{"--redis", "redis://" + user + ":" + pw + "@127.0.0.1:1", "run", "x", "--", "true"}, exitRedis},
		{"unreachable rediss", nil, []string{"--redis", "rediss://" + user + ":" + pw + "@127.0.0.1:1", "status", "x"}, exitRedis},
		{"bad escape in the password", nil, []string{"--redis", "redis://" + user + ":" + pw + "%zz@127.0.0.1:1", "status", "x"}, exitUsage},
		{"bad scheme", nil, []string{"--redis", "http://" + user + ":" + pw + "@127.0.0.1:1", "status", "x"}, exitUsage},
		{"bare user:pass@host", nil, []string{"--redis", user + ":" + pw + "@127.0.0.1:1", "status", "x"}, exitUsage},
		{"two passwords", []string{"TENURE_REDIS_PASSWORD=" + pw}, []string{"--redis", wrong, "status", "x"}, exitUsage},
		{"TLS files without rediss", []string{"TENURE_TLS_CA=" + file}, []string{"--redis", wrong, "status", "x"}, exitUsage},
		{"help", []string{"REDIS_URL=" + wrong}, []string{"run", "--help"}, 0},
		{"root help", []string{"REDIS_URL=" + wrong}, []string{"--help"}, 0},
		// It works, and says everything at -vv: still no password.
		{"-vv, right password", nil, []string{"-vv", "--redis", good, "run", "--ttl", "300ms", "x", "--", "sleep", "0.5"}, 0},
	} {
		t.Run(tc.what, func(t *testing.T) {
			code, out, stderr := result(t, on(tc.env, tc.args...))
			if code != tc.want {
				t.Errorf("status %d, want %d; stderr: %s", code, tc.want, stderr)
			}
			for _, secret := range []string{pw, u.Password} {
				if strings.Contains(out+stderr, secret) {
					t.Errorf("the password is printed:\nstdout: %s\nstderr: %s", out, stderr)
				}
			}
			if code != 0 && !strings.HasPrefix(stderr, "tenure:") && !strings.Contains(stderr, "\ntenure:") {
				t.Errorf("no message: %q", stderr)
			}
		})
	}
	// The help warns of a password in --redis.
	if _, out, _ := result(t, on(nil, "--help")); !strings.Contains(out, "visible to every user of the machine") {
		t.Errorf("--help does not warn of a password in --redis:\n%s", out)
	}
	// The command does not get the password.
	code, out, stderr := result(t, on([]string{"REDIS_URL=" + userURL(srv, user), "TENURE_REDIS_PASSWORD=" + u.Password},
		"run", "x", "--", "sh", "-c", `echo "[${TENURE_REDIS_PASSWORD-unset}]"`))
	if code != 0 || out != "[unset]\n" {
		t.Errorf("the command's $TENURE_REDIS_PASSWORD: %d %q %s", code, out, stderr)
	}
}

// TestTLS: the CLI over TLS-only servers, with the authority's and the
// client's files from flags and from the environment: every subcommand
// with server verification (--tls-ca), and as docs/security.md's user with
// mutual TLS; refused (78) without a client certificate where the server
// requires one, and without the authority.
func TestTLS(t *testing.T) {
	certs := redistest.MustCerts(t)
	verify := redistest.Start(t, redistest.Config{TLS: &redistest.TLS{Certs: certs, AuthClients: "no"}})
	mutual := redistest.Start(t, redistest.Config{TLS: &redistest.TLS{Certs: certs, AuthClients: "yes"}})
	ca, cert, key := verify.TLSFile("ca.crt"), verify.TLSFile("client.crt"), verify.TLSFile("client.key")

	t.Run("server verification", func(t *testing.T) {
		everyFeature(t, verify, []string{"REDIS_URL=" + verify.URL(), "TENURE_TLS_CA=" + ca}, "tls")
		code, out, e := result(t, on([]string{"REDIS_URL=" + verify.URL()}, "--tls-ca", ca, "status", "tls-lease"))
		if code != 0 || !strings.Contains(out, "kind") {
			t.Errorf("--tls-ca: %d %s %s", code, out, e)
		}
	})
	t.Run("mutual TLS as the ACL user", func(t *testing.T) {
		u := mutual.CreateUser(t, "tenure-tls", "tenure:")
		mutual.ResetACLLog(t)
		env := []string{"REDIS_URL=" + userURL(mutual, u.Name), "TENURE_REDIS_PASSWORD=" + u.Password,
			"TENURE_TLS_CA=" + ca, "TENURE_TLS_CERT=" + cert, "TENURE_TLS_KEY=" + key}
		everyFeature(t, mutual, env, "mtls")
		if log := mutual.ACLLog(t); len(log) > 0 {
			t.Errorf("the ACL LOG has refusals:\n%s", strings.Join(log, "\n"))
		}
		code, _, stderr := result(t, on([]string{"REDIS_URL=" + mutual.URL()}, "--tls-ca", ca, "--tls-cert", cert, "--tls-key", key,
			"run", "mtls-flags", "--", "true"))
		if code != 0 {
			t.Errorf("--tls-cert and --tls-key: %d %s", code, stderr)
		}
	})
	for _, tc := range []struct {
		what string
		env  []string
		want int
		msg  string
	}{
		{"no client certificate", []string{"REDIS_URL=" + mutual.URL(), "TENURE_TLS_CA=" + ca}, exitRefused, "TLS handshake failed on a certificate"},
		{"server not trusted", []string{"REDIS_URL=" + verify.URL()}, exitRefused, "TLS handshake failed on a certificate"},
		{"cert without key", []string{"REDIS_URL=" + mutual.URL(), "TENURE_TLS_CERT=" + cert}, exitUsage, "--tls-cert and --tls-key go together"},
		{"plain URL to a TLS server", []string{"REDIS_URL=" + strings.Replace(verify.URL(), "rediss:", "redis:", 1)}, exitRedis, "redis at"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			code, _, stderr := result(t, on(tc.env, "status", "x"))
			if code != tc.want || !strings.Contains(stderr, tc.msg) {
				t.Errorf("status %d, want %d with %q: %s", code, tc.want, tc.msg, stderr)
			}
		})
	}
	// Over TLS 1.3 a server that requires a client certificate refuses
	// its absence after the client's handshake is done: the first PING
	// may meet a reset instead of the alert, a race that made the case
	// "no client certificate" above fail now and then. Given such a reset,
	// reach asks again without writing and reports the refusal.
	t.Run("a reset after the handshake is asked about", func(t *testing.T) {
		pem, err := os.ReadFile(ca)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		targetOf := func(url string) *target {
			t.Helper()
			tg, err := parseTarget(url)
			if err != nil || tg.tls == nil {
				t.Fatalf("parseTarget(%s): %v, tls %v", url, err, tg.tls)
			}
			tg.tls.RootCAs = pool
			return tg
		}
		reset := &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNRESET)}
		ctx := context.Background()
		if err := targetOf(mutual.URL()).explainClosed(ctx, reset); refusal(err) != "tls" || !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("a reset by a server that requires a client certificate, none given: %v (refusal %q), want a TLS refusal that keeps the reset",
				err, refusal(err))
		}
		if err := targetOf(verify.URL()).explainClosed(ctx, reset); err != reset {
			t.Errorf("a reset by a server that took us: %v, want the reset as it was", err)
		}
		other := errors.New("i/o timeout")
		if err := targetOf(mutual.URL()).explainClosed(ctx, other); err != other {
			t.Errorf("a failure other than a close: %v, want it as it was", err)
		}
	})
}

// checkACLClean checks what TestACLUserCLI's commands left: no refusal in
// the server's ACL LOG nor in their stderr, and, in what MONITOR saw (cmds),
// no script touching a key it was not given, and the release --force
// script run on permits.
func checkACLClean(t *testing.T, cmds []redistest.Command, stderr string) {
	if log := srv.ACLLog(t); len(log) > 0 {
		t.Errorf("the ACL LOG has refusals:\n%s", strings.Join(log, "\n"))
	}
	if strings.Contains(stderr, "NOPERM") || strings.Contains(stderr, "can't run") || strings.Contains(stderr, "ACL failure") {
		t.Errorf("a refusal on stderr:\n%s", stderr)
	}
	ctx := context.Background()
	admin := srv.Client(t)
	v, err := redistest.ScriptKeyViolations(ctx, admin, cmds)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) > 0 {
		t.Errorf("scripts touched keys they were not given:\n%s", strings.Join(v, "\n"))
	}
	// The release --force script ran, watched, on permits too.
	scripts := 0
	for _, c := range cmds {
		if c.Client == "lua" && len(c.Args) > 0 && strings.EqualFold(c.Args[0], "zrange") {
			scripts++
		}
	}
	if scripts == 0 {
		t.Error("MONITOR saw no script call ZRANGE: the release --force of the permits went unwatched")
	}
}

// checkWatchRefused checks that status --watch and elect --observe, as a
// user refused the commands they need (status: env, elect: observer),
// exit 78 at once.
func checkWatchRefused(t *testing.T, env, observer []string) {
	// Refused from the start, --watch exits at once with 78.
	code, _, stderr := result(t, on(env, "status", "--watch", "narrow"))
	if code != exitRefused || !strings.Contains(stderr, "'type' command") {
		t.Errorf("status --watch of a refused user: %d %s", code, stderr)
	}
	// So does elect --observe (which would otherwise wait on in silence:
	// it is killed after a minute).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := on(observer, "elect", "--observe", "narrow")
	observe := exec.CommandContext(ctx, o.Path, o.Args[1:]...)
	observe.Env = o.Env
	code, _, stderr = result(t, observe)
	if code != exitRefused || !strings.Contains(stderr, "observing") {
		t.Errorf("elect --observe of a refused user: %d %s", code, stderr)
	}
}
