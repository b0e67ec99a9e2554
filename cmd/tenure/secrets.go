package main

// Secrets kept: the password and the user information of every URL never
// reach tenure's stderr, and the password never reaches a command's
// environment. (A lease's token is never printed either: inspect.go,
// release.go.)

import (
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
)

// childEnv is the environment of a command run under a lease: tenure's
// own, less the password it was given for Redis, which is tenure's and
// not the command's. (REDIS_URL stays: commands may use it themselves.)
func childEnv() []string {
	env := os.Environ()
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, envPassword+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// userinfo matches the user information of a URL: scheme://USERINFO@.
// Greedy up to the last @ before a space, so that a password holding an
// unescaped @ is covered too.
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^\s]*@`)

// userinfoScheme is what userinfo takes for a URL's scheme.
var userinfoScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// commandArgs matches the arguments that Redis quotes in an "unknown
// command" error (a script sent to a sentinel, say), to the end of the
// line: an acquire's arguments hold the request's token, which tenure
// never prints, and a name may hold a quote, so that the quoted arguments
// cannot be told apart from what follows them.
var commandArgs = regexp.MustCompile(`(with args beginning with:)[^\n]*`)

// redact hides the user information of every URL in s, the arguments of
// a command that Redis quotes back, and every secret (literally, for
// those of 4 bytes or more: shorter ones would mask words).
func redact(s string, secrets []string) string {
	s = userinfo.ReplaceAllString(s, "${1}xxxxx@")
	s = commandArgs.ReplaceAllString(s, "${1} (not shown)")
	for _, sec := range secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, "xxxxx")
		}
	}
	return s
}

// redactor is tenure's stderr: every write goes through redact. tenure
// writes whole lines (a message, a log record) in one call each, so a
// secret is never split between two writes.
type redactor struct {
	w       io.Writer
	mu      sync.Mutex
	secrets []string
}

func (r *redactor) add(secrets ...string) {
	r.mu.Lock()
	r.secrets = append(r.secrets, secrets...)
	r.mu.Unlock()
}

func (r *redactor) Write(p []byte) (int, error) {
	r.mu.Lock()
	secrets := r.secrets
	r.mu.Unlock()
	if _, err := io.WriteString(r.w, redact(string(p), secrets)); err != nil {
		return 0, err
	}
	return len(p), nil
}
