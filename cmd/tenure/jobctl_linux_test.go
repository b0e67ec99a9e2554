package main

// Job control: a stopped tenure, SIGTSTP refused, the terminal given to the
// command, Ctrl-Z at the terminal, and a command that stays stopped.

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// These tests check S9 against tenure's own job control: a tenure that is
// stopped (SIGSTOP, SIGTSTP), a command that reads the terminal, a command
// that is stopped. As in safety_linux_test.go they judge by order, never by
// the clock: each first holder's command writes numbered lines to a file,
// the next holder's command writes a start marker to the same file, and no
// line of the first may follow the marker.

// writer writes its pid to $1, then "A 1", "A 2"... to $2, one every 10ms:
// $3 lines, or forever when $3 is empty.
const writer = `echo $$ > "$1"; i=0
while [ -z "$3" ] || [ $i -lt "$3" ]; do i=$((i+1)); echo "A $i" >> "$2"; sleep 0.01; done`

// marker, run as the next holder's command, writes "B start" to $1, and
// "B end" half a second later: time for a first command still running to
// write after the marker.
const marker = `echo "B start" >> "$1"; sleep 0.5; echo "B end" >> "$1"`

// startWriter starts c (a tenure running writer with pidFile and out) and
// waits until its command has written 3 lines; it returns the command's
// process group, which is killed at the end of the test whatever happens.
func startWriter(t *testing.T, c *exec.Cmd, pidFile, out string) int {
	t.Helper()
	startBackground(t, c)
	pid, err := strconv.Atoi(waitFile(t, pidFile, 1, 10*time.Second)[0])
	if err != nil {
		t.Fatal(err)
	}
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	waitFile(t, out, 3, 10*time.Second)
	return pgid
}

// checkOrder reads out: the first holder's lines ("A n"), then "B start"
// and "B end", and nothing of the first holder after the marker. It
// returns how many lines the first holder wrote.
func checkOrder(t *testing.T, out string) int {
	t.Helper()
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	started, as, after := -1, 0, []string(nil)
	for i, l := range lines {
		switch {
		case l == "B start":
			started = i
		case strings.HasPrefix(l, "A "):
			as++
			if started >= 0 {
				after = append(after, l)
			}
		}
	}
	if started < 0 || lines[len(lines)-1] != "B end" {
		t.Fatalf("the second holder's command did not run through:\n%s", data)
	}
	if len(after) > 0 {
		t.Errorf("the first holder's command wrote %d lines (%q to %q) after the second holder's command started",
			len(after), after[0], after[len(after)-1])
	}
	return as
}

// TestStoppedTenureGroupDiesByDeadline: tenure stopped by SIGSTOP (which
// it cannot catch) renews nothing, so its lease expires and a second
// tenure gets the name; the guard, told the last local deadline, must have
// killed the first command's group by then, so none of its lines follows
// the second command's start marker. Before the guard kept the deadline,
// only tenure's own timer stopped the command, and the stopped tenure's
// command wrote on while the second ran. Continued, the first tenure finds
// its lease gone and exits 77.
func TestStoppedTenureGroupDiesByDeadline(t *testing.T) {
	dir := t.TempDir()
	pidFile, out := filepath.Join(dir, "pid"), filepath.Join(dir, "out")
	a := tenure("run", "--ttl", "2s", "stopped", "--", "sh", "-c", writer, "sh", pidFile, out, "")
	var stderrA syncBuffer
	a.Stderr = &stderrA
	pgid := startWriter(t, a, pidFile, out)
	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Process.Signal(syscall.SIGCONT) })

	b := tenure("run", "--ttl", "5s", "stopped", "--", "sh", "-c", marker, "sh", out)
	var stderrB syncBuffer
	b.Stderr = &stderrB
	startBackground(t, b)
	if code := exitOf(t, b, 30*time.Second); code != 0 {
		t.Fatalf("the second holder exited %d: %s", code, stderrB.String())
	}
	if err := a.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, a, 30*time.Second); code != exitLost {
		t.Errorf("the stopped holder exited %d once continued, want %d; stderr: %s", code, exitLost, stderrA.String())
	}
	waitGone(t, pgid, 10*time.Second)
	checkOrder(t, out)
}

// TestTSTPRefused: SIGTSTP (what Ctrl-Z sends) to tenure is refused with a
// line on stderr: tenure goes on renewing, its command runs to its end,
// and a second tenure waiting for the name gets it only then. Before,
// tenure stopped, its lease expired, and its command ran on under the
// second holder.
func TestTSTPRefused(t *testing.T) {
	dir := t.TempDir()
	pidFile, out := filepath.Join(dir, "pid"), filepath.Join(dir, "out")
	a := tenure("run", "--ttl", "2s", "tstp", "--", "sh", "-c", writer, "sh", pidFile, out, "300")
	var stderrA syncBuffer
	a.Stderr = &stderrA
	startWriter(t, a, pidFile, out)
	if err := a.Process.Signal(syscall.SIGTSTP); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, &stderrA, "SIGTSTP (Ctrl-Z) ignored", 10*time.Second)

	b := tenure("run", "tstp", "--", "sh", "-c", marker, "sh", out)
	var stderrB syncBuffer
	b.Stderr = &stderrB
	startBackground(t, b)
	if code := exitOf(t, a, 30*time.Second); code != 0 {
		t.Errorf("the first holder exited %d, want its command's 0; stderr: %s", code, stderrA.String())
	}
	if code := exitOf(t, b, 30*time.Second); code != 0 {
		t.Fatalf("the second holder exited %d: %s", code, stderrB.String())
	}
	if n := checkOrder(t, out); n != 300 {
		t.Errorf("the first holder's command wrote %d lines, want all 300", n)
	}
}

// openPTY opens a pseudo-terminal: its master, and its slave with no
// process's controlling terminal yet.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// startOnTerminal starts c in a new session whose controlling terminal is
// a new pseudo-terminal, with c in its foreground as a login shell would
// be: it returns the master, and what the terminal shows (c's output and
// stderr, and the echo of what is typed).
func startOnTerminal(t *testing.T, c *exec.Cmd) (master *os.File, screen *syncBuffer) {
	t.Helper()
	m, s := openPTY(t)
	c.Stdin, c.Stdout, c.Stderr = s, s, s
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	startBackground(t, c)
	s.Close()
	screen = &syncBuffer{}
	go func() { _, _ = io.Copy(screen, m) }()
	return m, screen
}

// TestCommandReadsTerminal: tenure in the foreground of a terminal makes
// the command's group the terminal's foreground, so the command reads what
// is typed; and when the command ends, tenure gives the terminal back to
// its own group, so the shell that ran it (here a non-interactive sh, in
// tenure's group) reads the next line. Before, the command, in a
// background group, got SIGTTIN when it read and stayed stopped, holding
// the lease.
func TestCommandReadsTerminal(t *testing.T) {
	dir := t.TempDir()
	got, after := filepath.Join(dir, "got"), filepath.Join(dir, "after")
	c := tenure()
	c.Args = []string{"sh", "-c", `"$1" run --ttl 2s reads-tty -- sh -c 'read a; echo "got $a" > "$1"' sh "$2"
echo "tenure exited $?" > "$3"
read b && echo "then $b" >> "$3"`, "sh", bin, got, after}
	c.Path = "/bin/sh"
	m, screen := startOnTerminal(t, c)
	if _, err := m.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	waitFile(t, after, 1, 30*time.Second)
	if _, err := m.Write([]byte("world\n")); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, c, 30*time.Second); code != 0 {
		t.Errorf("the shell exited %d, want 0; the terminal shows:\n%s", code, screen.String())
	}
	if data, err := os.ReadFile(got); err != nil || string(data) != "got hello\n" {
		t.Errorf("the command got %q (%v), want %q; the terminal shows:\n%s", data, err, "got hello\n", screen.String())
	}
	if data, _ := os.ReadFile(after); string(data) != "tenure exited 0\nthen world\n" {
		t.Errorf("after tenure, the shell wrote %q, want tenure's 0 and the next line read from the terminal; the terminal shows:\n%s",
			data, screen.String())
	}
}

// TestCtrlZAtTerminal: Ctrl-Z typed at the terminal stops the command's
// group, which has the terminal; tenure says so and continues it, and the
// command runs to its end.
func TestCtrlZAtTerminal(t *testing.T) {
	dir := t.TempDir()
	pidFile, out := filepath.Join(dir, "pid"), filepath.Join(dir, "out")
	c := tenure("run", "--ttl", "2s", "ctrl-z", "--", "sh", "-c", writer, "sh", pidFile, out, "200")
	m, screen := startOnTerminal(t, c)
	pid := waitFile(t, pidFile, 1, 10*time.Second)[0]
	waitFile(t, out, 3, 10*time.Second)
	if _, err := m.Write([]byte{0x1a}); err != nil { // ^Z, VSUSP
		t.Fatal(err)
	}
	// Generous: it failed once at 10s in a whole -race suite beside two
	// busy loops, and never alone; the command's state says, next time,
	// whether the stop was never made or never reported.
	const want = "stopped by SIGTSTP (Ctrl-Z)"
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(screen.String(), want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			stat, _ := os.ReadFile("/proc/" + pid + "/stat")
			t.Fatalf("no %q on the terminal after 30s; the command's /proc stat: %s; the terminal shows:\n%s", want, stat, screen.String())
		}
	}
	if code := exitOf(t, c, 30*time.Second); code != 0 {
		t.Errorf("tenure exited %d, want 0; the terminal shows:\n%s", code, screen.String())
	}
	if lines := waitFile(t, out, 1, time.Second); len(lines) != 200 {
		t.Errorf("the command wrote %d lines, want all 200; the terminal shows:\n%s", len(lines), screen.String())
	}
}

// TestStoppedCommandKilled: a command that stops itself (SIGSTOP) would
// hold the lease doing nothing; tenure says so, and when it has stayed
// stopped for the TTL kills its group, exits 137 (128+SIGKILL) and
// releases the lease.
func TestStoppedCommandKilled(t *testing.T) {
	c := client(t)
	cmd := tenure("run", "--ttl", "2s", "self-stop", "--", "sh", "-c", `kill -STOP $$; echo resumed`)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	startBackground(t, cmd)
	waitOutput(t, &stderr, "the command was stopped by SIGSTOP", 10*time.Second)
	if code := exitOf(t, cmd, 30*time.Second); code != 128+int(syscall.SIGKILL) {
		t.Errorf("tenure exited %d, want %d; stderr: %s", code, 128+int(syscall.SIGKILL), stderr.String())
	}
	if !strings.Contains(stderr.String(), "stayed stopped (SIGSTOP) for 2s: killed its process group") {
		t.Errorf("tenure did not say it killed the stopped command: %s", stderr.String())
	}
	if n, _ := c.Exists(context.Background(), "tenure:{self-stop}").Result(); n != 0 {
		t.Error("the lease is still held")
	}
}
