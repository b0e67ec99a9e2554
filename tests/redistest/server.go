// Package redistest starts and controls real redis-server processes for tests,
// benchmarks and chaos runs.
//
// Every server listens on a free port on 127.0.0.1 only, lives in its own
// temporary directory, and is killed by Stop (or by tb.Cleanup when started
// through a testing.TB helper). On Linux the kernel also kills it if the
// process that started it dies, so a crashed test binary leaves nothing behind.
//
// A test can pause (SIGSTOP), resume, kill and restart a server, build a Redis
// Cluster or a Sentinel group from the same binary, and put an in-process TCP
// Proxy between one client and its server to add latency, black-hole the
// traffic or reset connections, while other clients still talk to Redis
// directly.
//
// Constructors come in two flavours: error-returning ones (StartServer,
// NewProxy, StartCluster, StartSentinel) for non-test code, and testing.TB
// wrappers (Start, StartProxy, NewCluster, NewSentinel) that fail the test and
// register cleanup. A missing redis-server binary is a test failure, never a
// skip: a suite that silently skips its Redis tests proves nothing.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// StartTimeout bounds how long a start or restart waits for the server
	// to answer PING.
	StartTimeout = 10 * time.Second

	// maxPortAttempts is how many fresh ports a first start tries before
	// giving up; each failure must be a bind conflict to justify a retry.
	maxPortAttempts = 8

	// killTimeout bounds the wait for a SIGKILLed process to be reaped. It
	// only expires if the process is stuck in the kernel.
	killTimeout = 10 * time.Second

	logName  = "redis.log"
	confName = "redis.conf"
)

// missingBinary is the message for a missing redis-server; it names the
// Debian package because that is what the project's CI and dev images use.
const missingBinary = "redis-server not found: install Debian's package redis-server (apt-get install redis-server) or set REDIS_SERVER"

// ErrNotRunning is returned by Pause and Resume when the server process is
// not running.
var ErrNotRunning = errors.New("redistest: server is not running")

// ErrStopped is returned by Restart after Stop.
var ErrStopped = errors.New("redistest: server was stopped")

// errPortInUse marks a start that failed only because the port was taken
// between choosing it and redis binding it; such a start is retried.
var errPortInUse = errors.New("port already in use")

// Binary returns the redis-server path: $REDIS_SERVER if set, else
// exec.LookPath("redis-server").
func Binary() (string, error) {
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("redis-server not found: REDIS_SERVER=%q: %w", p, err)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("redis-server not found: REDIS_SERVER=%q is not an executable file", p)
		}
		return p, nil
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New(missingBinary)
	}
	return p, nil
}

// BinaryVersion returns the major and minor version that bin --version
// prints ("v=7.0.15": 7, 0; Valkey prints its own), 0, 0 when it prints
// none. It runs the binary once per path.
func BinaryVersion(bin string) (major, minor int) {
	v, _ := versions.LoadOrStore(bin, sync.OnceValue(func() [2]int {
		out, err := exec.Command(bin, "--version").Output()
		if err != nil {
			return [2]int{}
		}
		_, rest, ok := strings.Cut(string(out), " v=")
		if !ok {
			return [2]int{}
		}
		var ver [2]int
		for i, part := range strings.SplitN(strings.Fields(rest + " ")[0], ".", 3) {
			if i < len(ver) {
				ver[i], _ = strconv.Atoi(part)
			}
		}
		return ver
	}))
	ver := v.(func() [2]int)()
	return ver[0], ver[1]
}

// versions holds, for each binary path, a func that reads its version once.
var versions sync.Map

// Config configures a server started by StartServer or Start. The zero value
// is a plain, non-persistent server.
type Config struct {
	// AOF turns on the append-only file with appendfsync always, so every
	// acknowledged write survives Kill followed by Restart. Without it the
	// server has no persistence at all (save "" and appendonly no), and a
	// Restart comes back empty. RDB snapshots stay off either way (save ""),
	// so no background save forks behind a test's back.
	AOF bool

	// Args are extra redis-server arguments, e.g. "--maxmemory", "1mb".
	// They follow the generated config file on the command line, so they
	// override it, and are passed again on every Restart. They must not
	// change port, bind or dir, which the harness relies on.
	Args []string

	// TLS, when set, makes the server TLS-only (tls.go).
	TLS *TLS
}

type serverKind int

const (
	kindPlain serverKind = iota
	kindCluster
	kindSentinel
)

type procSignal int

const (
	sigStop procSignal = iota
	sigCont
	sigKill
)

// Server is one redis-server (or redis-sentinel) process on 127.0.0.1. Its
// port and directory stay the same across Restart. Methods are safe for
// concurrent use; lifecycle operations (Pause, Resume, Kill, Restart, Stop)
// are serialized.
type Server struct {
	cfg  Config
	kind serverKind
	bin  string
	dir  string
	// sentinelConf holds the "sentinel ..." lines of a sentinel's config.
	sentinelConf string

	// port and busPort are chosen during the first start and never change
	// afterwards, so reading them without a lock is safe once the
	// constructor has returned.
	port    int
	busPort int // cluster bus port; 0 unless kindCluster

	tlsFiles map[string]string // a TLS server's PEM files, by name (tls.go)

	mu      sync.Mutex // serializes lifecycle operations
	stopped bool       // guarded by mu

	proc   atomic.Pointer[process]
	paused atomic.Bool
}

// process is one run of the server binary. A Restart creates a new one.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once Wait has returned
	err  error         // Wait's result; read only after done is closed
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// StartServer starts a redis-server on a free port on 127.0.0.1 with its own
// temporary directory and waits (up to StartTimeout) until it answers PING.
// If the chosen port is grabbed by someone else before redis binds it, it
// retries with a new port. The caller must call Stop.
func StartServer(cfg Config) (*Server, error) {
	return startServer(cfg, kindPlain, "")
}

func startServer(cfg Config, kind serverKind, sentinelConf string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: temp dir: %w", err)
	}
	cfg.Args = append([]string(nil), cfg.Args...)
	s := &Server{cfg: cfg, kind: kind, bin: bin, dir: dir, sentinelConf: sentinelConf}
	if err := s.prepareTLS(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := s.startFresh(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// Start is StartServer for tests: it fails the test (never skips it) when the
// binary is missing or the server does not come up, and stops the server in
// tb.Cleanup. If the test failed, the cleanup logs the tail of the server's
// log first. At most one Config is used.
func Start(tb testing.TB, cfgs ...Config) *Server {
	tb.Helper()
	if len(cfgs) > 1 {
		tb.Fatalf("redistest.Start: at most one Config, got %d", len(cfgs))
	}
	var cfg Config
	if len(cfgs) == 1 {
		cfg = cfgs[0]
	}
	if _, err := Binary(); err != nil {
		tb.Fatal(err)
	}
	s, err := StartServer(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	cleanupServer(tb, s)
	return s
}

// cleanupServer registers s.Stop with tb, logging the server's log tail first
// when the test failed, because the log lives in the temp dir Stop deletes.
func cleanupServer(tb testing.TB, s *Server) {
	cleanupGroup(tb, "redis-server "+s.Addr(), s.Stop, s)
}

// cleanupGroup registers stop (what stops a server, a Cluster or a Sentinel
// group, named what) with tb, logging the log tail of each of servers first
// when the test failed.
func cleanupGroup(tb testing.TB, what string, stop func() error, servers ...*Server) {
	tb.Cleanup(func() {
		if tb.Failed() {
			for _, s := range servers {
				tb.Logf("%s log tail:\n%s", s.Addr(), s.LogTail())
			}
		}
		if err := stop(); err != nil {
			tb.Errorf("redistest: stopping %s: %v", what, err)
		}
	})
}

// Addr returns "127.0.0.1:PORT".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL returns "redis://127.0.0.1:PORT", or "rediss://127.0.0.1:PORT" for a
// TLS server.
func (s *Server) URL() string {
	if s.cfg.TLS != nil {
		return "rediss://" + s.Addr()
	}
	return "redis://" + s.Addr()
}

// Port returns the TCP port; it does not change across Restart.
func (s *Server) Port() int { return s.port }

// Dir returns the server's working directory (AOF, nodes.conf, config and
// log live there). Stop removes it.
func (s *Server) Dir() string { return s.dir }

// LogPath returns the file that receives the server's stdout and stderr,
// appended to across restarts.
func (s *Server) LogPath() string { return filepath.Join(s.dir, logName) }

// LogTail returns the last lines of the server's log, for error messages.
func (s *Server) LogTail() string { return logTail(s.LogPath(), 40) }

// Pid returns the process id of the current run, or 0 if it never started.
func (s *Server) Pid() int {
	if p := s.proc.Load(); p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// Running reports whether the server process is alive. A paused server is
// running.
func (s *Server) Running() bool {
	p := s.proc.Load()
	return p != nil && !p.exited()
}

// Paused reports whether the server was paused by Pause and not resumed,
// killed or restarted since.
func (s *Server) Paused() bool { return s.paused.Load() && s.Running() }

// Options returns go-redis options for this server: ContextTimeoutEnabled so
// a ctx deadline bounds each command (a paused server must not hang a test),
// and a short DialTimeout; on a TLS server, TLS that trusts its authority
// and presents the client certificate. Callers may adjust the copy before
// NewClient.
func (s *Server) Options() *redis.Options {
	o := &redis.Options{
		Addr:                  s.Addr(),
		ContextTimeoutEnabled: true,
		DialTimeout:           2 * time.Second,
	}
	if s.cfg.TLS != nil {
		o.TLSConfig = s.cfg.TLS.Certs.ClientConfig(true)
	}
	return o
}

// NewClient returns a go-redis client for this server (see Options); the
// caller closes it.
func (s *Server) NewClient() *redis.Client { return redis.NewClient(s.Options()) }

// Client returns a go-redis client for this server, closed in tb.Cleanup.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := s.NewClient()
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Pause stops the server process (and any fork of it) with SIGSTOP: it keeps
// its sockets, the kernel still accepts connections into the backlog, but it
// answers nothing until Resume. It returns once the kernel reports the process
// stopped, so a command sent right after Pause cannot slip through.
func (s *Server) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc.Load()
	if p == nil || p.exited() {
		return ErrNotRunning
	}
	if err := signalProcess(p.cmd.Process, sigStop); err != nil {
		return fmt.Errorf("redistest: pause %s: %w", s.Addr(), err)
	}
	s.paused.Store(true)
	waitStopped(p.cmd.Process.Pid, time.Second)
	return nil
}

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc.Load()
	if p == nil || p.exited() {
		return ErrNotRunning
	}
	if err := signalProcess(p.cmd.Process, sigCont); err != nil {
		return fmt.Errorf("redistest: resume %s: %w", s.Addr(), err)
	}
	s.paused.Store(false)
	return nil
}

// Kill sends SIGKILL (no shutdown, no final save: like a crash or power loss)
// and waits for the process to exit. Killing a server that is not running is
// a no-op.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killLocked()
}

func (s *Server) killLocked() error {
	p := s.proc.Load()
	if p == nil {
		return nil
	}
	s.paused.Store(false)
	return killProcess(p)
}

func killProcess(p *process) error {
	if p.exited() {
		return nil
	}
	// SIGKILL works on a stopped process too, so no SIGCONT is needed.
	_ = signalProcess(p.cmd.Process, sigKill)
	select {
	case <-p.done:
		return nil
	case <-time.After(killTimeout):
		return fmt.Errorf("redistest: pid %d did not exit %v after SIGKILL", p.cmd.Process.Pid, killTimeout)
	}
}

// Restart kills the server if it is running, then starts it again on the same
// port and in the same directory, so with Config.AOF the data survives, and
// any CONFIG REWRITE done to its config file (e.g. by Sentinel) is kept. It
// waits until the server answers PING, which for an AOF server means the file
// has been loaded.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ErrStopped
	}
	if err := s.killLocked(); err != nil {
		return err
	}
	return s.relaunchLocked()
}

// Stop kills the server if it is running and removes its directory. It is
// idempotent.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	err := s.killLocked()
	if rmErr := os.RemoveAll(s.dir); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}

// MustPause calls Pause and fails the test on error.
func (s *Server) MustPause(tb testing.TB) {
	tb.Helper()
	if err := s.Pause(); err != nil {
		tb.Fatal(err)
	}
}

// MustResume calls Resume and fails the test on error.
func (s *Server) MustResume(tb testing.TB) {
	tb.Helper()
	if err := s.Resume(); err != nil {
		tb.Fatal(err)
	}
}

// MustKill calls Kill and fails the test on error.
func (s *Server) MustKill(tb testing.TB) {
	tb.Helper()
	if err := s.Kill(); err != nil {
		tb.Fatal(err)
	}
}

// MustRestart calls Restart and fails the test on error.
func (s *Server) MustRestart(tb testing.TB) {
	tb.Helper()
	if err := s.Restart(); err != nil {
		tb.Fatal(err)
	}
}

// startFresh picks ports, writes the config and launches, retrying with new
// ports while the only problem is a bind conflict.
func (s *Server) startFresh() error {
	var lastErr error
	for range maxPortAttempts {
		port, err := freePort()
		if err != nil {
			return err
		}
		s.port = port
		if s.kind == kindCluster {
			if s.busPort, err = freePort(); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(s.dir, confName), []byte(s.renderConf()), 0o644); err != nil {
			return fmt.Errorf("redistest: writing config: %w", err)
		}
		lastErr = s.launch()
		if lastErr == nil || !errors.Is(lastErr, errPortInUse) {
			return lastErr
		}
	}
	return fmt.Errorf("redistest: no free port after %d attempts: %w", maxPortAttempts, lastErr)
}

// renderConf writes the config file. Settings live in a file rather than on
// the command line so that CONFIG REWRITE works (Sentinel rewrites both its
// own config and that of the servers it reconfigures).
func (s *Server) renderConf() string {
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	line("# generated by github.com/tenure-go/tenure/tests/redistest")
	if s.cfg.TLS != nil {
		b.WriteString(s.tlsConf())
	} else {
		line("port %d", s.port)
	}
	line("bind 127.0.0.1") // loopback only, never another address
	line("dir %s", strconv.Quote(s.dir))
	line("daemonize no")
	line(`logfile ""`) // stdout, which goes to redis.log in dir
	if s.kind == kindSentinel {
		line("sentinel announce-ip 127.0.0.1")
		b.WriteString(s.sentinelConf)
		return b.String()
	}
	line(`save ""`)
	if s.cfg.AOF {
		line("appendonly yes")
		line("appendfsync always")
	} else {
		line("appendonly no")
	}
	// The default 5s delay before a diskless full sync would make every
	// replica in a Cluster or Sentinel group take 5s to attach.
	line("repl-diskless-sync-delay 0")
	// DEBUG SLEEP and friends are handy for fault injection from tests;
	// before 7.0 the directive does not exist and DEBUG is always on.
	if major, _ := BinaryVersion(s.bin); major >= 7 {
		line("enable-debug-command local")
	}
	if s.kind == kindCluster {
		line("cluster-enabled yes")
		line("cluster-config-file nodes.conf")
		line("cluster-node-timeout %d", ClusterNodeTimeout.Milliseconds())
		// An explicit bus port: the default port+10000 overflows for
		// ports from the upper ephemeral range.
		line("cluster-port %d", s.busPort)
		line("cluster-announce-ip 127.0.0.1")
	}
	return b.String()
}

// launch runs the binary once on the current port and waits until it answers
// PING. On failure the process is killed and the error carries the log tail.
func (s *Server) launch() error {
	logf, err := os.OpenFile(s.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("redistest: log file: %w", err)
	}
	// The marker lets LogTail and startup errors show only this run.
	fmt.Fprintf(logf, "%s starting on port %d at %s\n", logMarker, s.port, time.Now().Format(time.RFC3339Nano))
	args := []string{filepath.Join(s.dir, confName)}
	if s.kind == kindSentinel {
		args = append(args, "--sentinel")
	}
	args = append(args, s.cfg.Args...)
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	// An *os.File is handed to the child directly, so no copying goroutine
	// outlives the process.
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	_ = logf.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("redistest: starting %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.proc.Store(p)
	s.paused.Store(false)

	if err := waitReady(p, s.dial, StartTimeout); err != nil {
		_ = killProcess(p)
		tail := s.LogTail()
		if strings.Contains(tail, "Address already in use") {
			err = fmt.Errorf("%w: %v", errPortInUse, err)
		}
		return fmt.Errorf("redistest: redis-server on 127.0.0.1:%d: %w\n--- %s (tail) ---\n%s", s.port, err, s.LogPath(), tail)
	}
	return nil
}

const logMarker = "=== redistest:"

// waitReady polls until the process answers PING on a connection from dial,
// the process exits, or timeout passes.
func waitReady(p *process, dial func(time.Duration) (net.Conn, error), timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		if p.exited() {
			return fmt.Errorf("exited during startup: %v", p.err)
		}
		lastErr = probe(dial, p.cmd.Process.Pid)
		if lastErr == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %v", timeout, lastErr)
		}
		select {
		case <-p.done:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// probe sends PING and INFO server with raw RESP and checks that the answer
// is PONG from the expected pid. The pid check matters: if another process
// took our port first, our server is about to die on "Address already in
// use", and the PONG would come from a stranger.
func probe(dial func(time.Duration) (net.Conn, error), pid int) error {
	conn, err := dial(250 * time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(conn, "PING\r\nINFO server\r\n"); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	pong, err := readReply(r)
	if err != nil {
		return err
	}
	info, err := readReply(r)
	if err != nil {
		return err
	}
	if pong != "PONG" {
		return fmt.Errorf("PING answered %q", pong)
	}
	if !strings.Contains(info, fmt.Sprintf("\nprocess_id:%d\r", pid)) {
		return errors.New("port answered by another process")
	}
	return nil
}

// readReply reads one RESP simple string, error or bulk string; it is all the
// probe needs, and avoids go-redis's background machinery during startup.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("server error: %s", line[1:])
	case '$', '=':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk header %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	default:
		return "", fmt.Errorf("unexpected reply %q", line)
	}
}

// logTail returns up to n last lines of path, starting no earlier than the
// last start marker.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	s := string(data)
	if i := strings.LastIndex(s, logMarker); i >= 0 {
		s = s[i:]
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// recentPorts remembers ports this process handed out lately, so two servers
// started concurrently here never get the same one (the kernel may offer a
// just-closed port again). Conflicts with other processes are handled by the
// retry in startFresh.
var recentPorts struct {
	sync.Mutex
	m map[int]time.Time
}

// freePort returns a port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	recentPorts.Lock()
	defer recentPorts.Unlock()
	if recentPorts.m == nil {
		recentPorts.m = make(map[int]time.Time)
	}
	now := time.Now()
	for p, t := range recentPorts.m {
		if now.Sub(t) > 5*time.Minute {
			delete(recentPorts.m, p)
		}
	}
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("redistest: finding a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if _, seen := recentPorts.m[port]; seen {
			continue
		}
		recentPorts.m[port] = now
		return port, nil
	}
	return 0, errors.New("redistest: finding a free port: kernel keeps offering used ports")
}
