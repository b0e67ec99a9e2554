package backend

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
)

// The slots Redis Cluster's specification and CLUSTER KEYSLOT give.
func TestSlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":            0x31C3 & 16383, // the spec's CRC16 check value
		"foo":                  12182,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"user1000":             3443,
		"foo{}{bar}":           8363, // an empty tag: the whole key
		"tenure:{a}:fence":     15495,
		"a":                    15495,
	} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
}

// Only an error the server gave the batch script itself makes the backend
// fall back to one renew.lua call per lease; an outage or a refusal that
// renew.lua would meet too does not.
func TestBatchUnsupported(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("dial tcp: connection refused"), false},
		{redis.ErrClosed, false},
		{proto("ERR Error running script (call to f_x): @user_script:30: ERR wrong number of arguments for 'pexpire' command"), true},
		{proto("ERR Error running script (call to f_x): @user_script:30: @user_script: 30: Wrong number of args calling Redis command From Lua script"), true},
		{proto("NOSCRIPT No matching script"), false},
		{proto("NOPERM this user has no permissions"), false},
		{proto("READONLY You can't write against a read only replica."), false},
		{proto("OOM command not allowed"), false},
		{proto("LOADING Redis is loading the dataset in memory"), false},
	} {
		if got := batchUnsupported(c.err); got != c.want {
			t.Errorf("batchUnsupported(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// proto is an error reply as go-redis returns one.
type proto string

func (e proto) Error() string { return string(e) }
func (proto) RedisError()     {}
