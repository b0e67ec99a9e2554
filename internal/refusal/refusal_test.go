package refusal_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/refusal"
	"github.com/tenure-go/tenure/tests/redistest"
)

// TestOf reads each refusal from the server the tests run on
// (REDIS_SERVER: Redis 7.0, 8.0 or Valkey), wrapped as callers wrap it,
// so that a server that words one differently fails here.
func TestOf(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	admin := srv.Client(t)
	if err := admin.Do(ctx, "acl", "setuser", "u", "on", ">pw", "~*", "&*", "+@all", "-pexpire").Err(); err != nil {
		t.Fatal(err)
	}
	o := srv.Options()
	o.Username, o.Password = "u", "pw"
	u := redis.NewClient(o)
	defer u.Close()
	wrap := func(err error) error { return fmt.Errorf("lease: extend %q: %w", "n", err) }

	cases := []struct {
		name string
		err  error
		want refusal.Kind
	}{
		{"script", u.Eval(ctx, "return redis.call('PEXPIRE', KEYS[1], 100)", []string{"k"}).Err(), refusal.Script},
		{"command", u.PExpire(ctx, "k", 100).Err(), refusal.Command},
		{"auth", func() error {
			o := srv.Options()
			o.Username, o.Password = "u", "wrong"
			c := redis.NewClient(o)
			defer c.Close()
			return c.Ping(ctx).Err()
		}(), refusal.Auth},
		{"other server error", u.Eval(ctx, "return redis.error_reply('ERR boom')", nil).Err(), refusal.None},
		{"not a server error", errors.New("ACL failure in script"), refusal.None},
		{"none", nil, refusal.None},
	}
	for _, c := range cases {
		if got := refusal.Of(wrap(c.err)); got != c.want {
			t.Errorf("%s: Of(%v) = %q, want %q", c.name, c.err, got, c.want)
		}
	}
}
