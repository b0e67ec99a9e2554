//go:build linux

package redistest_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/tests/redistest"
)

const orphanEnv = "REDISTEST_ORPHAN_CHILD"

// A test binary that dies without cleanup (crash, go test timeout, kill -9)
// must not leave its servers running: the child re-runs this test as a
// process that starts a server and hangs, and gets SIGKILLed.
func TestServerDiesWithTestBinary(t *testing.T) {
	if os.Getenv(orphanEnv) == "1" {
		s, err := redistest.StartServer(redistest.Config{})
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Printf("%d %s\n", s.Pid(), s.Dir())
		time.Sleep(time.Minute)
		os.Exit(1)
	}
	t.Parallel()
	// Become a subreaper so the orphaned server is reparented to us and can
	// be reaped below; in a container whose PID 1 never reaps, it would
	// otherwise stay a zombie.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Logf("PR_SET_CHILD_SUBREAPER: %v", errno)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithTestBinary$")
	cmd.Env = append(os.Environ(), orphanEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	var dir string
	line, err := bufio.NewReader(out).ReadString('\n')
	if _, scanErr := fmt.Sscanf(line, "%d %s", &pid, &dir); err != nil || scanErr != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child said %q: %v %v", line, err, scanErr)
	}
	defer os.RemoveAll(dir)
	if !alive(pid) {
		t.Fatalf("server %d not running in child", pid)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server %d outlived its killed parent", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 50 {
		var ws syscall.WaitStatus
		if wpid, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); wpid == pid || err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const prSetChildSubreaper = 36 // from <linux/prctl.h>

// alive reports whether pid exists and is not a zombie (an orphan is reaped
// by whoever is PID 1, which in a container may never happen).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	return i < 0 || i+2 >= len(data) || (data[i+2] != 'Z' && data[i+2] != 'X')
}
