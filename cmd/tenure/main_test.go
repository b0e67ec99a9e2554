package main

// The tests' setup (a built binary, a Redis server) and the helpers most
// tests share: running tenure, waiting for files and exits.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/tests/redistest"
)

// bin is the tenure binary built once for the tests; srv is their Redis.
var (
	bin string
	srv *redistest.Server
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "tenure-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "tenure")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building tenure: %v\n%s", err, out)
		return 1
	}
	srv, err = redistest.StartServer(redistest.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	_ = srv.Stop()
	if code == 0 {
		if err := redistest.Leaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}

// tenure returns the command for the built binary against the test server.
func tenure(args ...string) *exec.Cmd {
	c := exec.Command(bin, args...)
	c.Env = append(os.Environ(), "REDIS_URL="+srv.URL())
	return c
}

// result runs c and returns its exit status and output.
func result(t *testing.T, c *exec.Cmd) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running %v: %v", c.Args, err)
	}
	return c.ProcessState.ExitCode(), out.String(), errOut.String()
}

func client(t *testing.T) *redis.Client { return srv.Client(t) }

// startBackground starts cmd, and kills it at the end of the test if it
// has not been waited for by then.
func startBackground(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
}

// waitFile waits until path has at least n lines, and returns them.
func waitFile(t *testing.T, path string, n int, within time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		data, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(data) > 0 && len(lines) >= n {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %q after %v, want %d lines", path, data, within, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exitOf waits for a started command and returns its status.
func exitOf(t *testing.T, c *exec.Cmd, within time.Duration) int {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	select {
	case <-done:
		return c.ProcessState.ExitCode()
	case <-time.After(within):
		_ = c.Process.Kill()
		<-done
		t.Fatalf("%v still running after %v", c.Args, within)
		return -1
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// liveInGroup lists the processes of group pgid that are neither gone nor
// zombies (an orphan may wait for a reaper that a container lacks).
func liveInGroup(pgid int) []string {
	if syscall.Kill(-pgid, 0) != nil {
		return nil
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var live []string
	for _, p := range stats {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces, so split after ')'.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) >= 3 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			live = append(live, p+": "+f[0])
		}
	}
	return live
}

// syncBuffer is a bytes.Buffer safe to write from exec's copying goroutine
// while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitOutput polls until b holds want.
func waitOutput(t *testing.T, b *syncBuffer, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(b.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output after %v:\n%s", want, within, b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// held is a "tenure run NAME" (no command) that holds NAME: its stdin,
// the line it printed, and its stderr.
type held struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	line   acquiredLine
	stderr *syncBuffer
}

// startHold starts "tenure run ARGS..." without a command and waits for
// the line that says it holds NAME.
func startHold(t *testing.T, c *exec.Cmd) *held {
	t.Helper()
	h := &held{cmd: c, stderr: &syncBuffer{}}
	c.Stderr = h.stderr
	var err error
	if h.stdin, err = c.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	startBackground(t, c)
	got := make(chan error, 1)
	go func() { got <- json.NewDecoder(out).Decode(&h.line) }()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the hold's line: %v; stderr: %s", err, h.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the hold printed nothing; stderr: %s", h.stderr.String())
	}
	return h
}
