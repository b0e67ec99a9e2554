// Package refusal tells a server refusing a user apart from a server
// failing: which refusals no retry mends, whatever the server's version.
//
// Servers word a script's refused command differently: Redis 7.0 says
// "The user executing the script can't run this command or subcommand",
// Redis 7.2 and later and Valkey say "ACL failure in script: User U has no
// permissions to run the 'C' command". Both are recognised here, so that
// the CLI and package election read the same refusal on every server the
// tests run on.
package refusal

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Kind names how the server refused.
type Kind string

// The kinds of refusal; None is no refusal at all.
const (
	None    Kind = ""
	Auth    Kind = "auth"    // WRONGPASS, NOAUTH
	Command Kind = "command" // NOPERM: a command, key or channel sent directly
	Script  Kind = "script"  // a command a Lua script called
)

// scriptRefused are the words of each server for a command a script
// called and the user may not run.
var scriptRefused = []string{
	"The user executing the script can't", // Redis 7.0
	"ACL failure in script",               // Redis 7.2+, Valkey
}

// Of returns how err, a reply of the server's somewhere in its chain,
// refused the user; None for any other error or none.
func Of(err error) Kind {
	var re redis.Error
	if !errors.As(err, &re) {
		return None
	}
	msg := re.Error()
	switch {
	case strings.HasPrefix(msg, "WRONGPASS"), strings.HasPrefix(msg, "NOAUTH"):
		return Auth
	case strings.HasPrefix(msg, "NOPERM"):
		return Command
	}
	for _, s := range scriptRefused {
		if strings.Contains(msg, s) {
			return Script
		}
	}
	return None
}
