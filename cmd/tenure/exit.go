package main

// How tenure exits: its own statuses, the error that carries one and its
// one line, and which status a Redis failure gets (a refusal, 78, or Redis
// unreachable, 69).

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"

	refused "github.com/tenure-go/tenure/internal/refusal"
)

// Exit statuses of tenure itself; a command run by "run" or "elect"
// otherwise passes its own status through.
const (
	exitError   = 1  // any other failure
	exitUsage   = 2  // bad flags or arguments
	exitRedis   = 69 // Redis unreachable or failing (EX_UNAVAILABLE)
	exitTimeout = 75 // --wait ran out: the name is held (EX_TEMPFAIL); --held-exit's default
	exitLimit   = 76 // run -n N: NAME's permits are held under another N, and no --resize (EX_PROTOCOL)
	exitLost    = 77 // the lease or leadership was lost while the command ran (EX_NOPERM); --lost-exit's default
	// Redis refused the user: a permission or authentication error, or a
	// certificate refused in the TLS handshake (EX_CONFIG: 77, EX_NOPERM,
	// was taken by exitLost before there was this status).
	exitRefused = 78
	exitNoExec  = 126 // the command could not be executed
	exitNoCmd   = 127 // the command was not found
	// A command killed by signal N, or a wait interrupted by it: 128+N.
)

// exitErr carries an exit status and the one line to print.
type exitErr struct {
	code int
	err  error
}

func (e *exitErr) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitErr) Unwrap() error { return e.err }

// fail is the exit error with code and the message format makes.
func fail(code int, format string, args ...any) error {
	return &exitErr{code: code, err: fmt.Errorf(format, args...)}
}

// status ends tenure with code and no message (a command's own status).
func status(code int) error { return &exitErr{code: code} }

// oneLine is s with every run of white space, newlines included, made one
// space: each of tenure's messages is one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// bare is err's message without the library's "tenure: " prefix, for
// messages that carry their own.
func bare(err error) string { return strings.TrimPrefix(err.Error(), "tenure: ") }

// Refusals: the server (or the TLS handshake) turning the user down,
// which no retry mends and which is no outage.

// refusal says how the server refused: "auth" (WRONGPASS, NOAUTH),
// "command" (NOPERM: a command, key or channel sent directly), "script" (a
// command a Lua script called), "tls" (a certificate refused, either way),
// or "" when err is no refusal.
func refusal(err error) string {
	if k := refused.Of(err); k != refused.None {
		return string(k)
	}
	var verr *tls.CertificateVerificationError
	if errors.As(err, &verr) {
		return "tls"
	}
	// A TLS alert from the server (crypto/tls reports one as a net.OpError
	// "remote error"): over TLS 1.3 a missing or unknown client
	// certificate shows so, on the first read after the handshake.
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "remote error" {
		return "tls"
	}
	return ""
}

// redisFailure is the exit error for err, met while doing what (a phrase:
// "acquiring \"x\""): a refusal (exitRefused) names the user and what was
// refused; anything else is Redis unreachable or failing (exitRedis).
func (g *globals) redisFailure(what string, err error) error {
	user := g.user
	if user == "" {
		user = "default"
	}
	switch refusal(err) {
	case "auth":
		return fail(exitRefused, "%s: Redis refused to authenticate user %q: %v", what, user, err)
	case "command":
		return fail(exitRefused, "%s: Redis refused user %q a command: %v; docs/security.md lists the commands and keys tenure needs", what, user, err)
	case "script":
		return fail(exitRefused, "%s: Redis refused user %q a command called by tenure's script for this (the server says: %v); "+
			"docs/security.md lists the commands each script calls", what, user, err)
	case "tls":
		return fail(exitRefused, "%s: the TLS handshake failed on a certificate: %v "+
			"(--tls-ca trusts the server's authority; --tls-cert and --tls-key present ours)", what, err)
	}
	return fail(exitRedis, "%s: %v", what, err)
}
