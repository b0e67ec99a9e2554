package backend

import (
	"context"

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

// command returns the EVALSHA (or, with eval, EVAL) command running the
// script with keys and args. The first key tells a Cluster client where
// to send it.
func (s *script) command(ctx context.Context, eval bool, keys []string, args ...any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	if eval {
		a = append(a, "eval", s.src)
	} else {
		a = append(a, "evalsha", s.sha)
	}
	a = append(a, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

// run sends the script with EVALSHA, and again with EVAL if the server
// does not know it.
func (s *script) run(ctx context.Context, c processor, keys []string, args ...any) *redis.Cmd {
	cmd := s.command(ctx, false, keys, args...)
	_ = c.Process(ctx, cmd)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd = s.command(ctx, true, keys, args...)
		_ = c.Process(ctx, cmd)
	}
	return cmd
}
