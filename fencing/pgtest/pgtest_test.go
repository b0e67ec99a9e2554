package pgtest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// TestMain stops the shared server and then checks that no goroutine is
// left: neither the one waiting for a postmaster nor any of pgconn's.
func TestMain(m *testing.M) {
	code := Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

func TestServerLifecycle(t *testing.T) {
	s, err := StartServer()
	if err != nil {
		failOrSkip(t, err)
	}
	pid := s.proc.cmd.Process.Pid
	if err := s.Exec("postgres", "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateDatabase("lifecycle"); err != nil {
		t.Fatal(err)
	}
	if err := s.Exec("lifecycle", "CREATE TABLE t (x int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	// A server error comes back as an error naming its SQLSTATE.
	if err := s.Exec("lifecycle", "SELECT * FROM missing"); err == nil || !strings.Contains(err.Error(), "42P01") {
		t.Fatalf("query of a missing table: %v, want SQLSTATE 42P01", err)
	}
	if err := s.Exec("nosuchdb", "SELECT 1"); err == nil || !strings.Contains(err.Error(), "3D000") {
		t.Fatalf("missing database: %v, want SQLSTATE 3D000", err)
	}
	if os.Geteuid() == 0 {
		st, err := os.Stat("/proc/" + strconv.Itoa(pid))
		if err != nil {
			t.Fatal(err)
		}
		if uid := st.Sys().(*syscall.Stat_t).Uid; uid == 0 {
			t.Fatalf("postmaster runs as root")
		}
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	// The whole process group is gone, backends included, and the directory.
	if err := syscall.Kill(-pid, 0); err != syscall.ESRCH {
		t.Fatalf("process group %d after Stop: kill 0 = %v, want ESRCH", pid, err)
	}
	if _, err := os.Stat(s.Dir()); !os.IsNotExist(err) {
		t.Fatalf("directory after Stop: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestCreateDatabaseRejectsOddNames(t *testing.T) {
	s := Shared(t)
	for _, name := range []string{"", `a"b`, "a b", "1abc", "x;DROP DATABASE postgres", strings.Repeat("a", 64)} {
		if err := s.CreateDatabase(name); err == nil {
			t.Errorf("CreateDatabase(%q) = nil, want an error", name)
		}
	}
	url := s.NewDatabase(t)
	if !strings.HasPrefix(url, "postgres://postgres@127.0.0.1:") {
		t.Fatalf("URL %q", url)
	}
}

func TestBinDirHonoursEnv(t *testing.T) {
	t.Setenv("POSTGRES_BIN_DIR", t.TempDir())
	if _, err := BinDir(); err == nil || !strings.Contains(err.Error(), "apt-get install postgresql") {
		t.Fatalf("BinDir with an empty POSTGRES_BIN_DIR: %v", err)
	}
}
