package redistest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/tests/redistest"
)

func mustGet(t *testing.T, c *redis.Client, key string) string {
	t.Helper()
	v, err := c.Get(ctxTimeout(t, 5*time.Second), key).Result()
	if err == redis.Nil {
		return "<missing>"
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

func mustSet(t *testing.T, c *redis.Client, key, val string) {
	t.Helper()
	if err := c.Set(ctxTimeout(t, 5*time.Second), key, val, 0).Err(); err != nil {
		t.Fatalf("SET %s: %v", key, err)
	}
}

// The server comes back with the snapshot's data, not the AOF's, and keeps
// what it is told afterwards across a plain kill and restart.
func TestRestartFromSnapshot(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{AOF: true})
	c := srv.Client(t)
	mustSet(t, c, "counter", "1")
	snap, err := srv.Save()
	if err != nil {
		t.Fatal(err)
	}
	mustSet(t, c, "counter", "2")
	mustSet(t, c, "after", "x")
	if err := srv.RestartFromSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, c, "counter"); got != "1" {
		t.Fatalf("counter after the restart from the snapshot: %s, want 1", got)
	}
	if got := mustGet(t, c, "after"); got != "<missing>" {
		t.Fatalf("a key written after the snapshot survived: %s", got)
	}
	mustSet(t, c, "later", "y")
	srv.MustRestart(t)
	if got := mustGet(t, c, "later"); got != "y" {
		t.Fatalf("the AOF was not back on after the restart from the snapshot: later = %s", got)
	}
}

// Cutting the AOF back to a mark loses what was written after it, also when
// the cut tears a command.
func TestRestartLosingAOFTail(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{AOF: true})
	c := srv.Client(t)
	mustSet(t, c, "counter", "1")
	mark, err := srv.MarkAOF()
	if err != nil {
		t.Fatal(err)
	}
	mustSet(t, c, "counter", "2")
	if err := srv.RestartLosingAOFTail(mark, 0); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, c, "counter"); got != "1" {
		t.Fatalf("counter: %s, want 1", got)
	}
	mark, err = srv.MarkAOF()
	if err != nil {
		t.Fatal(err)
	}
	mustSet(t, c, "counter", "3")
	if err := srv.RestartLosingAOFTail(mark, 7); err != nil { // inside "*3\r\n$3\r\nset..."
		t.Fatalf("a torn tail: %v", err)
	}
	if got := mustGet(t, c, "counter"); got != "1" {
		t.Fatalf("counter after a torn tail: %s, want 1", got)
	}
}

// A replica cut off from its primary and promoted has the data it had when
// it was cut off; clients behind a proxy follow it after SetTarget.
func TestReplicaPromotedWhileLagging(t *testing.T) {
	primary := redistest.Start(t, redistest.Config{AOF: true})
	replica := redistest.Start(t, redistest.Config{AOF: true})
	link := redistest.StartProxy(t, primary.Addr())
	front := redistest.StartProxy(t, primary.Addr())
	if err := replica.ReplicaOf(link.Addr()); err != nil {
		t.Fatal(err)
	}
	if err := replica.WaitReplicaSynced(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	opts := primary.Options()
	opts.Addr = front.Addr()
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	mustSet(t, c, "counter", "1")
	rc := replica.Client(t)
	eventually(t, 5*time.Second, func() error {
		if got := mustGet(t, rc, "counter"); got != "1" {
			return fmt.Errorf("replica has counter %s", got)
		}
		return nil
	})
	link.BlackHole(true)
	mustSet(t, c, "counter", "2")
	primary.MustKill(t)
	if err := replica.ReplicaOf(""); err != nil {
		t.Fatal(err)
	}
	front.SetTarget(replica.Addr())
	front.ResetConnections()
	if front.Target() != replica.Addr() {
		t.Fatalf("Target %s after SetTarget(%s)", front.Target(), replica.Addr())
	}
	eventually(t, 5*time.Second, func() error {
		v, err := c.Get(ctxTimeout(t, time.Second), "counter").Result()
		if err != nil {
			return err
		}
		if v != "1" {
			return fmt.Errorf("counter through the retargeted proxy: %s, want the lagging replica's 1", v)
		}
		return nil
	})
	if err := c.Set(ctxTimeout(t, time.Second), "counter", "3", 0).Err(); err != nil {
		t.Fatalf("the promoted replica takes no writes: %v", err)
	}
}
