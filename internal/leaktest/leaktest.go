// Package leaktest finds the goroutines a test left running. It does what
// the part of go.uber.org/goleak these tests used does, with goleak's
// defaults, so that the root module requires no test library: every
// requirement of the root module, test-only or not, is listed by
// `go list -m all` in every program that imports tenure.
package leaktest

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A goroutine is one goroutine's part of a runtime.Stack dump.
type goroutine struct {
	id    int
	state string          // "chan receive", "select, 2 minutes", …
	top   string          // the function on top of its stack
	funcs map[string]bool // every function on its stack, not its creator
	dump  string
}

func (g goroutine) String() string {
	return fmt.Sprintf("goroutine %d in state %s, with %s on top of the stack:\n%s", g.id, g.state, g.top, g.dump)
}

// An Option tells Find to ignore some goroutines.
type Option func(goroutine) bool

// IgnoreCurrent ignores the goroutines running now, so that a test can
// check what it started itself.
func IgnoreCurrent() Option {
	ids := map[int]bool{}
	for _, g := range stacks(true) {
		ids[g.id] = true
	}
	return func(g goroutine) bool { return ids[g.id] }
}

// Find returns an error listing the goroutines running besides the caller,
// the testing package's and the runtime's own, and those opts ignore. It
// waits a little for them to end first (about 0.4s, as goleak does).
func Find(opts ...Option) error {
	self := stacks(false)[0].id
	var left []goroutine
	for i := 0; ; i++ {
		left = left[:0]
		for _, g := range stacks(true) {
			if g.id != self && !ignored(g, opts) {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if i >= 20 {
			break
		}
		time.Sleep(min(time.Microsecond<<i, 100*time.Millisecond))
	}
	var b strings.Builder
	for _, g := range left {
		b.WriteString(g.String())
		b.WriteString("\n")
	}
	return fmt.Errorf("found unexpected goroutines:\n%s", b.String())
}

// VerifyTestMain runs the tests and, when they pass, fails the binary if a
// goroutine is left over. It does not return.
func VerifyTestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := Find(); err != nil {
			fmt.Fprintf(os.Stderr, "leaktest: errors on a successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func ignored(g goroutine, opts []Option) bool {
	switch g.top {
	case "testing.RunTests", "testing.(*T).Run", "testing.(*T).Parallel", "testing.runFuzzing", "testing.runFuzzTests":
		// The testing package's goroutines, waiting for tests to end.
		if strings.HasPrefix(g.state, "chan receive") {
			return true
		}
	case "os/signal.signal_recv", "os/signal.loop":
		return true // started by importing os/signal
	}
	switch {
	case g.funcs["runtime.goexit"] && strings.HasPrefix(g.state, "syscall"):
		return true // cgo's background goroutines
	case g.funcs["runtime.ensureSigM"]: // started by signal.Notify
		return true
	case g.funcs["runtime.ReadTrace"]: // an execution trace (go test -trace)
		return true
	}
	for _, o := range opts {
		if o(g) {
			return true
		}
	}
	return false
}

// stacks returns every goroutine, or only the caller's.
func stacks(all bool) []goroutine {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, all)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return parse(string(buf))
}

// parse reads a runtime.Stack dump: blocks separated by blank lines, each a
// header "goroutine ID [STATE]:" and then, per frame, a line "pkg.F(args)"
// and a line "\tfile:line +off"; the last frame may be "created by pkg.F in
// goroutine N", which is not on the stack.
func parse(dump string) []goroutine {
	var out []goroutine
	for block := range strings.SplitSeq(strings.TrimSpace(dump), "\n\n") {
		header, body, _ := strings.Cut(block, "\n")
		rest, ok := strings.CutPrefix(header, "goroutine ")
		if !ok {
			continue
		}
		idText, _, _ := strings.Cut(rest, " ")
		id, err := strconv.Atoi(idText)
		if err != nil {
			continue
		}
		g := goroutine{id: id, funcs: map[string]bool{}, dump: body + "\n"}
		if s, e := strings.IndexByte(rest, '['), strings.LastIndexByte(rest, ']'); s >= 0 && e > s {
			g.state = rest[s+1 : e]
		}
		for line := range strings.SplitSeq(body, "\n") {
			if line == "" || line[0] == '\t' || strings.HasPrefix(line, "created by ") {
				continue
			}
			name := line
			if i := strings.LastIndexByte(line, '('); i > 0 {
				name = line[:i]
			}
			g.funcs[name] = true
			if g.top == "" {
				g.top = name
			}
		}
		out = append(out, g)
	}
	return out
}
