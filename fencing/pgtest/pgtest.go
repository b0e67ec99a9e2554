// Package pgtest starts real PostgreSQL servers for tests, from the binaries
// of Debian's postgresql package, as package redistest does for Redis.
//
// A server is initdb'ed into a temporary directory, listens on a free port
// on 127.0.0.1 only (and on a unix socket inside that directory), runs with
// fsync off, and is killed and its directory removed by Stop. When the
// process runs as root, which PostgreSQL refuses, initdb and postgres run as
// Debian's postgres user. On Linux the kernel kills the postmaster if the
// process that started it dies, and its backends follow it.
//
// The package belongs to the fencing module, whose tests use it and which
// already requires pgx: it talks to the server through pgx's pgconn (Exec)
// to know the server is ready and to create databases, so that the library's
// root module, which a program importing the library gets, needs no driver.
// The examples module's tests import it too. Tests connect with the driver
// of their choice through URL.
package pgtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const (
	// StartTimeout bounds how long a start waits for the server to accept
	// connections.
	StartTimeout = 30 * time.Second

	// stopTimeout bounds the wait for an immediate shutdown before the
	// process group is killed.
	stopTimeout = 10 * time.Second

	maxPortAttempts = 8
	logName         = "postgres.log"
	superuser       = "postgres"
)

// ErrMissing is wrapped by the error of a start that found no binaries.
var ErrMissing = errors.New("pgtest: PostgreSQL binaries not found: install Debian's package postgresql (apt-get install postgresql) or set POSTGRES_BIN_DIR to the directory holding initdb and postgres")

// errPortInUse marks a start that failed only because the port was taken
// between choosing it and postgres binding it; such a start is retried.
var errPortInUse = errors.New("port already in use")

// BinDir returns the directory holding initdb and postgres: $POSTGRES_BIN_DIR
// if set, else the newest /usr/lib/postgresql/*/bin (Debian's layout), else
// the directory of initdb on PATH.
func BinDir() (string, error) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			st, err := os.Stat(filepath.Join(dir, b))
			if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if dir := os.Getenv("POSTGRES_BIN_DIR"); dir != "" {
		if !has(dir) {
			return "", fmt.Errorf("%w (POSTGRES_BIN_DIR=%q has no executable initdb and postgres)", ErrMissing, dir)
		}
		return dir, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest major version first: "9.6" < "15" needs a numeric sort.
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, dir := range dirs {
		if has(dir) {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", ErrMissing
}

func majorOf(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

// Server is one PostgreSQL server (a postmaster and its backends) on
// 127.0.0.1, with the superuser "postgres" and trust authentication.
type Server struct {
	dir   string
	port  int
	cred  *syscall.Credential // nil unless we run as root
	binDr string

	mu      sync.Mutex
	proc    *process
	stopped bool

	dbs atomic.Int64 // databases created by NewDatabase, for their names
}

type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // read only after done is closed
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// StartServer initdb's a cluster in a new temporary directory, starts
// postgres on a free port on 127.0.0.1 and waits (up to StartTimeout) until it
// accepts connections. The caller must call Stop. Without binaries the error
// wraps ErrMissing.
func StartServer() (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: temp dir: %w", err)
	}
	s := &Server{dir: dir, binDr: bin}
	if err := s.start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root ("root" execution of the
		// PostgreSQL server is not permitted), and CI runs as root.
		cred, err := postgresUser()
		if err != nil {
			return err
		}
		s.cred = cred
		if err := os.Chown(s.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("pgtest: chown %s: %w", s.dir, err)
		}
	}
	out, err := s.command("initdb", "-D", s.dataDir(), "-U", superuser, "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	var lastErr error
	for range maxPortAttempts {
		if s.port, err = freePort(); err != nil {
			return err
		}
		lastErr = s.launch()
		if lastErr == nil || !errors.Is(lastErr, errPortInUse) {
			return lastErr
		}
	}
	return fmt.Errorf("pgtest: no free port after %d attempts: %w", maxPortAttempts, lastErr)
}

// postgresUser returns the credentials of Debian's postgres user.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup(superuser)
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, and PostgreSQL refuses root: need the postgres user (Debian's postgresql package creates it): %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgtest: postgres user has uid %q gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.binDr, name), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	attr := sysProcAttr()
	attr.Credential = s.cred
	cmd.SysProcAttr = attr
	return cmd
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

// launch runs postgres once on the current port and waits until it accepts
// connections.
func (s *Server) launch() error {
	logf, err := os.OpenFile(s.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: log file: %w", err)
	}
	fmt.Fprintf(logf, "%s starting on port %d at %s\n", logMarker, s.port, time.Now().Format(time.RFC3339Nano))
	cmd := s.command("postgres", "-D", s.dataDir(),
		"-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", // loopback only, never another address
		"-c", "unix_socket_directories="+s.dir,
		// A test server's data is thrown away: durability only costs time.
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=200",
	)
	cmd.Stdout = logf // an *os.File: no copying goroutine outlives the process
	cmd.Stderr = logf
	err = cmd.Start()
	_ = logf.Close()
	if err != nil {
		return fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()

	if err := s.waitReady(p); err != nil {
		_ = stopProcess(p)
		tail := s.LogTail()
		if strings.Contains(tail, "could not bind") || strings.Contains(tail, "Address already in use") {
			err = fmt.Errorf("%w: %v", errPortInUse, err)
		}
		return fmt.Errorf("pgtest: postgres on 127.0.0.1:%d: %w\n--- %s (tail) ---\n%s", s.port, err, s.LogPath(), tail)
	}
	return nil
}

const logMarker = "=== pgtest:"

func (s *Server) waitReady(p *process) error {
	deadline := time.Now().Add(StartTimeout)
	for {
		if p.exited() {
			return fmt.Errorf("exited during startup: %v", p.err)
		}
		err := s.Exec("postgres", "SELECT 1")
		if err == nil {
			if p.exited() { // another server answered on our port
				return fmt.Errorf("exited during startup: %v", p.err)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %v", StartTimeout, err)
		}
		select {
		case <-p.done:
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// Port returns the server's TCP port.
func (s *Server) Port() int { return s.port }

// Addr returns "127.0.0.1:PORT".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL returns a connection URL for database db as the superuser, without
// TLS: postgres://postgres@127.0.0.1:PORT/db?sslmode=disable.
func (s *Server) URL(db string) string {
	return "postgres://" + superuser + "@" + s.Addr() + "/" + db + "?sslmode=disable"
}

// Dir returns the server's temporary directory (data, socket, log).
func (s *Server) Dir() string { return s.dir }

// LogPath returns the file that receives the server's output.
func (s *Server) LogPath() string { return filepath.Join(s.dir, logName) }

// LogTail returns the last lines of the server's log since its last start.
func (s *Server) LogTail() string {
	data, err := os.ReadFile(s.LogPath())
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	text := string(data)
	if i := strings.LastIndex(text, logMarker); i >= 0 {
		text = text[i:]
	}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

// CreateDatabase creates database name. The name must be a plain identifier
// (letters, digits, underscores), as it is written into the statement.
func (s *Server) CreateDatabase(name string) error {
	for i, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') || i >= 63 {
			return fmt.Errorf("pgtest: database name %q is not a plain identifier", name)
		}
	}
	if name == "" {
		return errors.New("pgtest: empty database name")
	}
	return s.Exec("postgres", `CREATE DATABASE "`+name+`"`)
}

// NewDatabase creates a database of its own for one test and returns its URL.
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("test_%d", s.dbs.Add(1))
	if err := s.CreateDatabase(name); err != nil {
		tb.Fatal(err)
	}
	return s.URL(name)
}

// Stop shuts the server down at once (SIGQUIT, PostgreSQL's immediate
// shutdown), kills whatever of its process group remains, and removes its
// directory. It is idempotent.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	var err error
	if s.proc != nil {
		err = stopProcess(s.proc)
	}
	if rmErr := os.RemoveAll(s.dir); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}

// stopProcess asks the postmaster for an immediate shutdown, which ends its
// backends, waits for it, and then kills its whole process group so that no
// backend can outlive it.
func stopProcess(p *process) error {
	pid := p.cmd.Process.Pid
	if !p.exited() {
		_ = syscall.Kill(pid, syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(stopTimeout):
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL) // the group: backends too
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
		return fmt.Errorf("pgtest: postmaster %d did not exit after SIGKILL", pid)
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// missingIsFatal reports whether a missing server fails a test rather than
// skipping it: in CI a suite that silently skips proves nothing.
func missingIsFatal() bool { return os.Getenv("CI") == "true" }

// Start is StartServer for one test: it stops the server in tb.Cleanup. A
// missing binary fails the test when CI=true and skips it otherwise, with a
// message naming the package to install.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := StartServer()
	if err != nil {
		failOrSkip(tb, err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("postgres %s log tail:\n%s", s.Addr(), s.LogTail())
		}
		if err := s.Stop(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return s
}

func failOrSkip(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrMissing) && !missingIsFatal() {
		tb.Skip(err)
	}
	tb.Fatal(err)
}

var shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// Shared returns the test binary's one server, started by the first call;
// Run stops it. A missing binary fails the test when CI=true and skips it
// otherwise. Give each test a database of its own (NewDatabase).
func Shared(tb testing.TB) *Server {
	tb.Helper()
	shared.once.Do(func() { shared.srv, shared.err = StartServer() })
	if shared.err != nil {
		failOrSkip(tb, shared.err)
	}
	return shared.srv
}

// Run runs a package's tests (call it from TestMain) and then stops the
// shared server, if a test started one. It returns m.Run's code, or 1 if the
// server did not stop cleanly.
func Run(m *testing.M) int {
	code := m.Run()
	if shared.srv != nil {
		if err := shared.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	return code
}
