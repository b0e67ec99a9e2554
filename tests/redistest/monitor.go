package redistest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Command is one command a server executed, as MONITOR reports it.
type Command struct {
	// Client is the sender's address, or "lua" for a command a script
	// called.
	Client string
	// Args are the command's name and arguments.
	Args []string
}

// Monitor records every command the server executes, through MONITOR on a
// connection of its own, until Stop.
type Monitor struct {
	s    *Server
	conn net.Conn
	done chan struct{}

	mu     sync.Mutex
	cmds   []Command
	err    error
	marker string
	seen   chan struct{} // closed when the marker comes through
}

// Monitor starts recording. The caller must call Stop.
func (s *Server) Monitor(tb testing.TB) *Monitor {
	tb.Helper()
	conn, err := s.dial(2 * time.Second)
	if err != nil {
		tb.Fatalf("redistest: MONITOR %s: %v", s.Addr(), err)
	}
	r := bufio.NewReader(conn)
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "MONITOR\r\n"); err != nil {
		conn.Close()
		tb.Fatalf("redistest: MONITOR %s: %v", s.Addr(), err)
	}
	if ok, err := readReply(r); err != nil || ok != "OK" {
		conn.Close()
		tb.Fatalf("redistest: MONITOR %s answered %q, %v", s.Addr(), ok, err)
	}
	_ = conn.SetDeadline(time.Time{})
	var b [8]byte
	_, _ = rand.Read(b[:])
	m := &Monitor{s: s, conn: conn, done: make(chan struct{}), marker: "redistest-monitor-" + hex.EncodeToString(b[:]),
		seen: make(chan struct{})}
	go m.read(r)
	return m
}

func (m *Monitor) read(r *bufio.Reader) {
	defer close(m.done)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			m.mu.Lock()
			m.err = err
			m.mu.Unlock()
			return
		}
		line = strings.TrimRight(line, "\r\n")
		if !strings.HasPrefix(line, "+") {
			continue
		}
		c, err := parseMonitorLine(line[1:])
		m.mu.Lock()
		if err != nil && m.err == nil {
			m.err = fmt.Errorf("%w in %q", err, line)
		}
		if err == nil {
			if len(c.Args) == 2 && strings.EqualFold(c.Args[0], "echo") && c.Args[1] == m.marker {
				close(m.seen)
				m.mu.Unlock()
				return
			}
			m.cmds = append(m.cmds, c)
		}
		m.mu.Unlock()
	}
}

// Stop ends the recording and returns every command executed since
// Monitor: it sends a marker through the server and waits until it comes
// back, so nothing executed before Stop is missed.
func (m *Monitor) Stop(tb testing.TB) []Command {
	tb.Helper()
	defer func() {
		m.conn.Close()
		<-m.done
	}()
	c := m.s.NewClient()
	defer c.Close()
	if err := c.Echo(context.Background(), m.marker).Err(); err != nil {
		tb.Fatalf("redistest: MONITOR marker: %v", err)
	}
	select {
	case <-m.seen:
	case <-m.done:
	case <-time.After(10 * time.Second):
		tb.Fatal("redistest: MONITOR marker did not come back in 10s")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		tb.Fatalf("redistest: MONITOR: %v", m.err)
	}
	return m.cmds
}

// parseMonitorLine parses `1700000000.123456 [0 127.0.0.1:5555] "get" "k"`.
func parseMonitorLine(s string) (Command, error) {
	open := strings.IndexByte(s, '[')
	end := strings.IndexByte(s, ']')
	if open < 0 || end < open {
		return Command{}, errors.New("no [db client]")
	}
	db, client, ok := strings.Cut(s[open+1:end], " ")
	if !ok || db == "" {
		return Command{}, errors.New("bad [db client]")
	}
	c := Command{Client: client}
	rest := s[end+1:]
	for {
		rest = strings.TrimLeft(rest, " ")
		if rest == "" {
			return c, nil
		}
		arg, n, err := unquote(rest)
		if err != nil {
			return Command{}, err
		}
		c.Args = append(c.Args, arg)
		rest = rest[n:]
	}
}

// unquote reads one argument as Redis quotes it (sdscatrepr): in double
// quotes, with \\ \" \n \r \t \a \b and \xHH escapes. It returns the
// argument and how many bytes of s it took.
func unquote(s string) (string, int, error) {
	if s == "" || s[0] != '"' {
		return "", 0, errors.New("argument not quoted")
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), i + 1, nil
		case '\\':
			if i+1 >= len(s) {
				return "", 0, errors.New("dangling backslash")
			}
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'x':
				if i+2 >= len(s) {
					return "", 0, errors.New("short \\x escape")
				}
				v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
				if err != nil {
					return "", 0, fmt.Errorf("bad \\x escape: %w", err)
				}
				b.WriteByte(byte(v))
				i += 2
			default:
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, errors.New("unterminated argument")
}

// ScriptKeyViolations checks that every command a script called touched
// only keys among the KEYS the script was given (so that an ACL key
// pattern, a Cluster slot and a reader of the script's call see all it
// touches), and published only on channels of its first key's name
// (KEYS[1] + ":..."). It asks the server (COMMAND GETKEYS, through admin)
// which arguments of each command are keys, and returns one line per
// violation.
func ScriptKeyViolations(ctx context.Context, admin *redis.Client, cmds []Command) ([]string, error) {
	var (
		out     []string
		keys    map[string]bool
		first   string
		script  string
		scripts int
	)
	for _, c := range cmds {
		if len(c.Args) == 0 {
			continue
		}
		name := strings.ToLower(c.Args[0])
		if c.Client != "lua" {
			keys, first, script = nil, "", ""
			if name != "eval" && name != "evalsha" && name != "eval_ro" && name != "evalsha_ro" {
				continue
			}
			if len(c.Args) < 3 {
				return nil, fmt.Errorf("short %v", c.Args)
			}
			n, err := strconv.Atoi(c.Args[2])
			if err != nil || n < 0 || 3+n > len(c.Args) {
				return nil, fmt.Errorf("bad numkeys in %q", c.Args)
			}
			scripts++
			keys = map[string]bool{}
			for _, k := range c.Args[3 : 3+n] {
				keys[k] = true
			}
			if n > 0 {
				first = c.Args[3]
			}
			script = c.Args[1]
			if len(script) > 40 {
				script = script[:40] + "..."
			}
			continue
		}
		if keys == nil {
			return nil, fmt.Errorf("a script's %v without its EVAL", c.Args)
		}
		if name == "publish" && len(c.Args) == 3 {
			if first == "" || !strings.HasPrefix(c.Args[1], first+":") {
				out = append(out, fmt.Sprintf("script %q (KEYS[1] %q) published on %q", script, first, c.Args[1]))
			}
			continue
		}
		if len(c.Args) == 1 {
			continue // TIME and the like: no arguments, no keys
		}
		args := []any{"command", "getkeys"}
		for _, a := range c.Args {
			args = append(args, a)
		}
		got, err := admin.Do(ctx, args...).StringSlice()
		if err != nil {
			if strings.Contains(err.Error(), "no key arguments") {
				continue
			}
			return nil, fmt.Errorf("COMMAND GETKEYS %q: %w", c.Args, err)
		}
		for _, k := range got {
			if !keys[k] {
				out = append(out, fmt.Sprintf("script %q called %q on %q, which is not among its KEYS", script, c.Args[0], k))
			}
		}
	}
	if scripts == 0 {
		return nil, errors.New("no script ran: nothing was checked")
	}
	return out, nil
}

// CheckUserRun stops mon and fails tb if, while it ran, the server refused
// anything (its ACL LOG, read since the server started or the last
// ResetACLLog), a script touched a key it was not given (ScriptKeyViolations),
// or a key outside prefix was left on the server: what a run as
// docs/security.md's user must show.
func (s *Server) CheckUserRun(tb testing.TB, mon *Monitor, prefix string) {
	tb.Helper()
	cmds := mon.Stop(tb)
	if log := s.ACLLog(tb); len(log) != 0 {
		tb.Errorf("the server refused: %q", log)
	}
	admin := s.NewClient()
	defer admin.Close()
	ctx := context.Background()
	v, err := ScriptKeyViolations(ctx, admin, cmds)
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range v {
		tb.Error(line)
	}
	iter := admin.Scan(ctx, 0, "*", 0).Iterator()
	for iter.Next(ctx) {
		if !strings.HasPrefix(iter.Val(), prefix) {
			tb.Errorf("key %q outside the prefix %q", iter.Val(), prefix)
		}
	}
	if err := iter.Err(); err != nil {
		tb.Fatal(err)
	}
}
