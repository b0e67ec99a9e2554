package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/backend"
)

// measureRelease releases batches of fresh leases with variant v for d
// (after one batch to warm up) and returns Redis CPU µs a release. The
// leases are taken by the library's acquire.lua before each batch, outside
// the CPU readings, so every variant releases what tenure holds; each batch
// includes one INFO cpu read (nativeReport.infoUS says what that costs).
func (nb *nativeBench) measureRelease(ctx context.Context, v string, d time.Duration) (float64, error) {
	var cpu float64
	released := 0
	for t0, warm := time.Now(), true; warm || released == 0 || time.Since(t0) < d; warm = false {
		nb.fresh++
		batch, err := nb.acquire(ctx, fmt.Sprintf("release-native-%d-", nb.fresh), nativeBatch)
		if err != nil {
			return 0, err
		}
		c0 := redisCPU(ctx, nb.admin)
		if err := nb.release(ctx, v, batch); err != nil {
			return 0, err
		}
		if !warm {
			cpu += redisCPU(ctx, nb.admin) - c0
			released += len(batch)
		}
	}
	return cpu * 1e6 / float64(released), nil
}

// release releases batch with variant v in one pipeline and checks that
// every lease was released.
func (nb *nativeBench) release(ctx context.Context, v string, batch []backend.Item) error {
	if v == "tenure" {
		errs := make([]error, len(batch))
		nb.be.Release(ctx, batch, errs)
		return firstItemError(batch, errs)
	}
	p := nb.c.Pipeline()
	dels := make([]*redis.Cmd, len(batch))
	for i, it := range batch {
		key := nb.layout.Lease(it.Name)
		if v == "delex" {
			dels[i] = p.Do(ctx, "DELEX", key, "IFEQ", it.Token)
			continue
		}
		dels[i] = p.Do(ctx, "DELIFEQ", key, it.Token)
		if v == "delifeq+publish" {
			p.Publish(ctx, nb.layout.Channel(it.Name), "released")
		}
	}
	if _, err := p.Exec(ctx); err != nil {
		return err
	}
	for i, cmd := range dels {
		if n, err := cmd.Int(); err != nil || n != 1 {
			return fmt.Errorf("%s not released: %v", batch[i].Name, cmd)
		}
	}
	return nil
}

// infoCost is the server CPU one INFO cpu read costs, in µs.
func infoCost(ctx context.Context, admin *redis.Client) float64 {
	const reads = 200
	c0 := redisCPU(ctx, admin)
	for range reads {
		redisCPU(ctx, admin)
	}
	return (redisCPU(ctx, admin) - c0) * 1e6 / (reads + 1)
}

// The commands a native path needs, as probeCommands names them.
var nativeCommands = []struct {
	needs string
	args  []any
}{
	{"SET IFEQ", []any{"SET", "native-probe", "x", "IFEQ", "x", "PX", 1000}},
	{"DELIFEQ", []any{"DELIFEQ", "native-probe", "x"}},
	{"DELEX", []any{"DELEX", "native-probe", "IFEQ", "x"}},
}

// probeCommands sends each native command once, on a key that does not
// exist, and returns the ones the server lacks with its answer. Any other
// error (a refused command, a lost connection) fails the scenario rather
// than report a command missing that is not.
func probeCommands(ctx context.Context, c *redis.Client) (map[string]string, error) {
	missing := map[string]string{}
	for _, nc := range nativeCommands {
		err := c.Do(ctx, nc.args...).Err()
		switch {
		case err == nil || errors.Is(err, redis.Nil):
		case missingCommand(err):
			missing[nc.needs] = err.Error()
		default:
			return nil, fmt.Errorf("probing %s: %w", nc.needs, err)
		}
	}
	return missing, nil
}

// missingCommand says whether err is a server's answer to a command or an
// option it does not have: "ERR unknown command 'DELIFEQ', with args
// beginning with: …" for a command, "ERR syntax error" for SET's IFEQ on a
// server whose SET lacks it (Redis 8.0.2).
func missingCommand(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "ERR unknown command") || msg == "ERR syntax error"
}

// serverVersion names the server from its INFO server: Valkey reports
// redis_version 7.2.4 for clients' sake, and its own in valkey_version.
func serverVersion(info string) string {
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	if v, ok := fields["valkey_version"]; ok {
		return "Valkey " + v
	}
	if v, ok := fields["redis_version"]; ok {
		return "Redis " + v
	}
	return "unknown"
}
