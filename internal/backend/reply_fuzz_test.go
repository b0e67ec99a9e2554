package backend_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
)

// FuzzScriptReplies feeds arbitrary bytes to the backend as the reply to
// each of its scripts, from a fake server behind the client's dialer: the
// backend parses whatever comes back into a result or an error, never a
// panic or a hang, and never mistakes garbage for success.
//
// Every input costs a few connections and goroutines, and go-redis's
// goroutines make coverage noisy, so fuzz without minimisation:
//
//	go test -run '^$' -fuzz FuzzScriptReplies -fuzzminimizetime 0 ./internal/backend
func FuzzScriptReplies(f *testing.F) {
	for _, s := range []string{
		"*2\r\n:1\r\n:42\r\n", "*2\r\n:0\r\n:1500\r\n", "*2\r\n:0\r\n:-1\r\n", "*2\r\n:0\r\n:-2\r\n", "*3\r\n:0\r\n:-3\r\n:2\r\n", "*4\r\n:0\r\n:1500\r\n:0\r\n:1\r\n",
		":1\r\n", ":0\r\n", ":7\r\n", ":-1\r\n", "-NOSCRIPT No matching script\r\n", "-ERR boom\r\n",
		"-READONLY You can't write against a read only replica.\r\n", "-OOM command not allowed\r\n",
		"$-1\r\n", "*-1\r\n", "*0\r\n", "*1\r\n:1\r\n", "*3\r\n:1\r\n:2\r\n:3\r\n", "*2\r\n$1\r\n1\r\n$2\r\n42\r\n",
		"*2\r\n:1\r\n$3\r\nabc\r\n", "+OK\r\n", "$1\r\n1\r\n", "*2\r\n:1\r\n", ":99999999999999999999\r\n", "",
		"*2\r\n*1\r\n:1\r\n:2\r\n", "x\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(fuzzBody)
}

// positiveInt is an integer reply above zero.
var positiveInt = regexp.MustCompile(`^:[1-9][0-9]*\r\n`)

func fuzzBody(t *testing.T, reply []byte) {
	{
		// go-redis allocates whatever an aggregate or bulk header
		// announces before reading it ("*999999999" costs gigabytes):
		// that is the client's to bound, not the backend's.
		if hugeHeader.Match(reply) {
			t.Skip()
		}
		c := redis.NewClient(&redis.Options{
			Addr: "fake:6379",
			Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
				client, server := net.Pipe()
				go fakeServer(server, reply)
				return client, nil
			},
			MaxRetries:   -1,
			Protocol:     2,
			ReadTimeout:  200 * time.Millisecond,
			WriteTimeout: 200 * time.Millisecond,
			PoolSize:     2,
		})
		defer c.Close()
		be := backend.NewRedis(c, "p:")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		raw := string(reply)

		// Success is a lease's fence alone (a positive integer) or a
		// three-element array; anything else is not.
		a, err := be.Acquire(ctx, backend.Request{Name: "n", Token: "tok", TTL: time.Second})
		if err == nil && a.Acquired && !strings.HasPrefix(raw, "*3\r\n") && !positiveInt.MatchString(raw) {
			t.Fatalf("acquired on reply %q", raw)
		}
		if err == nil && a.Acquired && a.Fence <= 0 {
			t.Fatalf("acquired with fence %d on reply %q", a.Fence, raw)
		}
		_ = backend.MaybeApplied(err)

		// One item a call: the fake server answers one command a
		// connection, and a second pipelined command would read what is
		// left of the first reply as its own.
		for i, op := range []func(context.Context, []backend.Item, []error){be.Renew, be.Release} {
			errs := make([]error, 1)
			op(ctx, []backend.Item{{Name: "n", Token: "tok", TTL: time.Second}}, errs)
			if errs[0] == nil && !isOne(raw) {
				t.Fatalf("success on reply %q", raw)
			}
			// A renewal answers -1 for a name found free; a release
			// never does.
			gone := i == 0 && strings.TrimSpace(raw) == ":-1"
			if errors.Is(errs[0], backend.ErrNotHeld) && !isZero(raw) && !gone {
				t.Fatalf("not held on reply %q", raw)
			}
			if errors.Is(errs[0], backend.ErrGone) && !gone {
				t.Fatalf("gone on reply %q (op %d)", raw, i)
			}
		}
		_ = be.Abandon(ctx, backend.Request{Name: "n", Token: "tok", TTL: time.Second})
	}
}

var hugeHeader = regexp.MustCompile(`[*$%~>=|!]\+?\d{5,}`)

// isOne and isZero tell whether a reply starts with the integer 1 or 0, in
// any of the forms go-redis reads as that integer.
func isOne(r string) bool  { return startsWithInt(r, "1") }
func isZero(r string) bool { return startsWithInt(r, "0") }

func startsWithInt(r, n string) bool {
	for _, form := range []string{":" + n + "\r\n", "$1\r\n" + n + "\r\n", "+" + n + "\r\n", ":+" + n + "\r\n", ":-" + n + "\r\n", ":0" + n + "\r\n"} {
		if strings.HasPrefix(r, form) {
			return true
		}
	}
	// Integers with leading zeros or signs: let strconv decide.
	if strings.HasPrefix(r, ":") {
		if end := strings.Index(r, "\r\n"); end > 0 {
			if v, err := strconv.ParseInt(r[1:end], 10, 64); err == nil {
				return strconv.FormatInt(v, 10) == n
			}
		}
	}
	return false
}

// fakeServer answers the client's connection handshake as an old server
// would, then answers the first script call with reply and hangs up, so
// that a truncated reply ends in EOF rather than a timeout.
func fakeServer(conn net.Conn, reply []byte) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	for {
		cmd, err := readCommand(r)
		if err != nil {
			return
		}
		switch strings.ToUpper(cmd) {
		case "HELLO":
			_, err = io.WriteString(conn, "-ERR unknown command 'HELLO'\r\n")
		case "CLIENT", "PING", "SELECT":
			_, err = io.WriteString(conn, "+OK\r\n")
		default:
			// A pipe's Write waits for the reader: bytes the client does
			// not read (a reply longer than it expects) must not hold the
			// connection up.
			_ = conn.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
			_, _ = conn.Write(reply)
			return
		}
		if err != nil {
			return
		}
	}
}

// readCommand reads one RESP command (an array of bulk strings) and returns
// its name.
func readCommand(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if len(line) < 3 || line[0] != '*' {
		return "", errors.New("not an array")
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return "", err
	}
	var name string
	for i := range n {
		hdr, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		size, err := strconv.Atoi(strings.TrimSpace(hdr[1:]))
		if err != nil || size < 0 {
			return "", errors.New("bad bulk")
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		if i == 0 {
			name = string(buf[:size])
		}
	}
	return name, nil
}

// A Redis older than 6.2 refuses SET ... GET inside acquire.lua with a
// syntax error: the acquire error names the version it needs.
func TestAcquireOnRedisTooOld(t *testing.T) {
	reply := "-ERR Error running script (call to f_1), @user_script:57: ERR syntax error\r\n"
	c := redis.NewClient(&redis.Options{
		Addr: "fake:6379",
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			client, server := net.Pipe()
			go fakeServer(server, []byte(reply))
			return client, nil
		},
		MaxRetries: -1,
		Protocol:   2,
	})
	defer c.Close()
	be := backend.NewRedis(c, "p:")
	_, err := be.Acquire(context.Background(), backend.Request{Name: "n", Token: "tok", TTL: time.Second})
	if err == nil || !strings.Contains(err.Error(), "Redis 6.2 or later") || !strings.Contains(err.Error(), "syntax error") {
		t.Fatalf("Acquire on a Redis without SET ... GET: %v", err)
	}
}
