package backend

import (
	"context"
	"crypto/fips140"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Script is a Lua script run with EVALSHA, and with EVAL when the server
// answers NOSCRIPT (after a restart or SCRIPT FLUSH), as go-redis's
// Script.Run does. It builds each command's arguments in one slice, with
// the script's SHA boxed once: Script.Run boxes the command name and the
// SHA on every call and copies the arguments into a second slice, which
// on the acquire-and-release path are a fifth of its allocations.
//
// Its SHA1 is computed here, unless Go runs in FIPS 140-3 mode
// (GODEBUG=fips140=on or only): there crypto/sha1 is not an approved
// algorithm, and with fips140=only it panics, so go-redis's NewScript
// cannot even run at package initialisation. Then the first call on a
// client asks the server (SCRIPT LOAD, which answers the SHA and keeps the
// script) and later calls send EVALSHA; until the SHA is known, or when
// SCRIPT LOAD is refused, calls send EVAL. The SHA depends on the source
// alone, so one answer serves every server: a server or Cluster node that
// does not have the script answers NOSCRIPT, and the EVAL that follows
// leaves it there, as it does outside FIPS mode.
type Script struct {
	src    string
	srcArg any                 // src, boxed once
	sha    atomic.Pointer[any] // the SHA1 (a string), boxed once, when known
	// loading: a SCRIPT LOAD is under way (calls meanwhile send EVAL);
	// refused: a server refused it (EVAL from now on, see load).
	loading, refused atomic.Bool
}

// NewScript returns the script of src. It computes nothing in FIPS 140-3
// mode (see Script).
func NewScript(src string) *Script { return newScript(src, !fips140.Enabled()) }

// newScript returns the script of src, with its SHA1 computed here when
// local, else learnt from the first server it is sent to.
func newScript(src string, local bool) *Script {
	s := &Script{src: src, srcArg: src}
	if local {
		sum := sha1.Sum([]byte(src))
		s.setSHA(hex.EncodeToString(sum[:]))
	}
	return s
}

// processor sends a command: a client, or a pipeline.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// call returns the arguments of an EVALSHA of the script with keys (an
// EVAL while its SHA is unknown), with room for n more: the caller appends
// the script's arguments, and sends the slice with send. Each key is
// passed as a pointer into keys, which go-redis writes (and routes in a
// Cluster) as the string: boxing the string itself would allocate once per
// key.
func (s *Script) call(keys []string, n int) []any {
	a := make([]any, 0, 3+len(keys)+n)
	if sha := s.sha.Load(); sha != nil {
		a = append(a, "evalsha", *sha, len(keys))
	} else {
		a = append(a, "eval", s.srcArg, len(keys))
	}
	for i := range keys {
		a = append(a, &keys[i])
	}
	return a
}

// cmd makes the command of a slice built by call; the first key tells a
// Cluster client where to send it.
func (s *Script) cmd(ctx context.Context, a []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, a...)
	if n, _ := a[2].(int); n > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

// eval returns a copy of a (built by call) that runs the script with EVAL:
// the EVALSHA command keeps a, its own arguments.
func (s *Script) eval(a []any) []any {
	e := make([]any, len(a))
	copy(e, a)
	e[0], e[1] = "eval", s.srcArg
	return e
}

// command returns the EVALSHA (or, with eval or while the SHA is unknown,
// EVAL) command running the script with keys and args. A pipeline's
// builder calls Load first, on the client, to learn the SHA.
func (s *Script) command(ctx context.Context, eval bool, keys []string, args ...any) *redis.Cmd {
	a := append(s.call(keys, len(args)), args...)
	if eval {
		a[0], a[1] = "eval", s.srcArg
	}
	return s.cmd(ctx, a)
}

// send sends the command of a slice built by call with EVALSHA, and again
// with EVAL if the server does not know the script. When c is a client and
// the SHA is unknown, it learns it first (Load).
func (s *Script) send(ctx context.Context, c processor, a []any) *redis.Cmd {
	if a[0] == "eval" {
		var key string
		if n, _ := a[2].(int); n > 0 {
			key = *a[3].(*string)
		}
		if sha := s.load(ctx, c, key); sha != nil {
			a[0], a[1] = "evalsha", sha
		}
	}
	cmd := s.cmd(ctx, a)
	_ = c.Process(ctx, cmd)
	// Checked first: HasErrorPrefix allocates even for a nil error.
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd = s.cmd(ctx, s.eval(a))
		_ = c.Process(ctx, cmd)
	}
	return cmd
}

// Run runs the script on c with keys and args: EVALSHA, and EVAL if the
// server does not know it. It has go-redis's Script.Run's signature, for
// the library's packages that used that. On a pipeline, the command is
// queued, and is sent with EVAL while the SHA is unknown.
func (s *Script) Run(ctx context.Context, c processor, keys []string, args ...any) *redis.Cmd {
	return s.send(ctx, c, append(s.call(keys, len(args)), args...))
}

// EvalSha queues (on a pipeline) or sends the script with EVALSHA, or
// with EVAL while the SHA is unknown; it does not retry NOSCRIPT.
func (s *Script) EvalSha(ctx context.Context, c processor, keys []string, args ...any) *redis.Cmd {
	cmd := s.command(ctx, false, keys, args...)
	_ = c.Process(ctx, cmd)
	return cmd
}

// Eval queues (on a pipeline) or sends the script with EVAL.
func (s *Script) Eval(ctx context.Context, c processor, keys []string, args ...any) *redis.Cmd {
	cmd := s.command(ctx, true, keys, args...)
	_ = c.Process(ctx, cmd)
	return cmd
}

// Load learns the script's SHA from the server that serves key (any
// server, when key is ""), unless it is known: a pipeline's builder calls
// it on the client before queueing EvalSha, which cannot learn it there.
func (s *Script) Load(ctx context.Context, c processor, key string) {
	if s.sha.Load() == nil {
		s.load(ctx, c, key)
	}
}

// load returns the SHA boxed, asking the server that serves key with
// SCRIPT LOAD when it is unknown; nil when it could not learn it: c is a
// pipeline, another call is asking, or the server refused or failed. A
// refusal (NOPERM: a user without +script|load; an unknown command: a
// proxy without it) stops the asking for good, so that neither the cost
// of the round trip nor an ACL LOG entry comes with every call; any other
// failure is tried again on the next call.
func (s *Script) load(ctx context.Context, c processor, key string) any {
	if sha := s.sha.Load(); sha != nil {
		return *sha
	}
	if _, pipe := c.(redis.Pipeliner); pipe || s.refused.Load() || !s.loading.CompareAndSwap(false, true) {
		return nil
	}
	defer s.loading.Store(false)
	if cc, ok := c.(*redis.ClusterClient); ok {
		// One node: the Cluster client sends SCRIPT LOAD to every
		// node, where one that is down fails it, and costs every call
		// the wait, until it is back.
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return nil
		}
		c = node
	}
	cmd := redis.NewStringCmd(ctx, "script", "load", s.src)
	_ = c.Process(ctx, cmd)
	sha, err := cmd.Result()
	switch {
	case err == nil && isSHA1(sha):
		return s.setSHA(sha)
	case err == nil || refusal(err):
		s.refused.Store(true)
	}
	return nil
}

// setSHA records sha, and returns it boxed.
func (s *Script) setSHA(sha string) any {
	var box any = sha
	s.sha.Store(&box)
	return box
}

// refusal reports whether err is a server's answer that SCRIPT LOAD will
// not be run for this user or connection, now or later.
func refusal(err error) bool {
	re, ok := replyOf(err)
	if !ok {
		return false
	}
	msg := strings.ToLower(re.Error())
	return strings.HasPrefix(msg, "noperm") || strings.Contains(msg, "unknown command") || strings.Contains(msg, "unknown subcommand")
}

// isSHA1 reports whether s is a SHA1 as SCRIPT LOAD writes it: 40
// lowercase hex digits.
func isSHA1(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// scriptArgs are a script's arguments after its keys, at most five, held
// by value so that building them allocates nothing.
type scriptArgs struct {
	v [5]any
	n int
}

func argsOf(v ...any) scriptArgs {
	var a scriptArgs
	for _, x := range v {
		a.add(x)
	}
	return a
}

// add appends v; more than scriptArgs holds is a bug of ours, never input.
func (a *scriptArgs) add(v any) {
	if a.n == len(a.v) {
		panic("backend: more script arguments than scriptArgs holds")
	}
	a.v[a.n] = v
	a.n++
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
