package backend

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A script is a Lua script run with EVALSHA, and with EVAL when the server
// answers NOSCRIPT (after a restart or SCRIPT FLUSH), as go-redis's
// Script.Run does. It builds each command's arguments in one slice, with
// the script's SHA boxed once: Script.Run boxes the command name and the
// SHA on every call and copies the arguments into a second slice, which
// on the acquire-and-release path are a fifth of its allocations.
type script struct {
	*redis.Script
	sha any // the SHA1, boxed once
	src any
}

func newScript(src string) *script {
	s := redis.NewScript(src)
	return &script{Script: s, sha: s.Hash(), src: src}
}

// processor sends a command: a client, or a pipeline.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// call returns the arguments of an EVALSHA of the script with keys, with
// room for n more: the caller appends the script's arguments, and sends
// the slice with send. Each key is passed as a pointer into keys, which
// go-redis writes (and routes in a Cluster) as the string: boxing the
// string itself would allocate once per key.
func (s *script) call(keys []string, n int) []any {
	a := make([]any, 0, 3+len(keys)+n)
	a = append(a, "evalsha", s.sha, len(keys))
	for i := range keys {
		a = append(a, &keys[i])
	}
	return a
}

// cmd makes the command of a slice built by call; the first key tells a
// Cluster client where to send it.
func (s *script) cmd(ctx context.Context, a []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, a...)
	if n, _ := a[2].(int); n > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

// eval returns a copy of a (built by call) that runs the script with EVAL:
// the EVALSHA command keeps a, its own arguments.
func (s *script) eval(a []any) []any {
	e := make([]any, len(a))
	copy(e, a)
	e[0], e[1] = "eval", s.src
	return e
}

// command returns the EVALSHA (or, with eval, EVAL) command running the
// script with keys and args.
func (s *script) command(ctx context.Context, eval bool, keys []string, args ...any) *redis.Cmd {
	a := append(s.call(keys, len(args)), args...)
	if eval {
		a[0], a[1] = "eval", s.src
	}
	return s.cmd(ctx, a)
}

// send sends the command of a slice built by call with EVALSHA, and again
// with EVAL if the server does not know the script.
func (s *script) send(ctx context.Context, c processor, a []any) *redis.Cmd {
	cmd := s.cmd(ctx, a)
	_ = c.Process(ctx, cmd)
	// Checked first: HasErrorPrefix allocates even for a nil error.
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd = s.cmd(ctx, s.eval(a))
		_ = c.Process(ctx, cmd)
	}
	return cmd
}

// scriptArgs are a script's arguments after its keys, at most four, held
// by value so that building them allocates nothing.
type scriptArgs struct {
	v [4]any
	n int
}

func argsOf(v ...any) scriptArgs {
	var a scriptArgs
	a.n = copy(a.v[:], v)
	return a
}

func (a *scriptArgs) slice() []any { return a.v[:a.n] }

// msBox is a duration boxed as a script argument in milliseconds.
type msBox struct {
	d time.Duration
	v any
}

// msArg returns d in milliseconds, rounded up as ms rounds, boxed. Boxing
// an integer above 255 allocates, and a manager passes the same TTL on
// nearly every call, so the last box is kept in p.
func msArg(p *atomic.Pointer[msBox], d time.Duration) any {
	if b := p.Load(); b != nil && b.d == d {
		return b.v
	}
	b := &msBox{d: d, v: ms(d)}
	p.Store(b)
	return b.v
}

// ms returns d in whole milliseconds, rounded up, for a script argument.
// Redis keeps keys to the millisecond, while a lease's local deadline
// counts its TTL in full (sent + ttl - drift, S2): a TTL truncated to
// 1000 ms for a lease of 1s + 700us would let the key expire up to 700us
// before the holder's deadline. Rounded up, the server never keeps a key,
// a marker or a counter for less than it was asked.
func ms(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
