package lease

import (
	"errors"
	"testing"
	"time"
)

func FuzzOptions(f *testing.F) {
	f.Add(int64(30e9), int64(0), 0.01, int64(2e6), "tenure:")
	f.Add(int64(1e9), int64(5e8), 0.0, int64(0), "a{")
	f.Add(int64(10e6), int64(3e6), 0.5, int64(-1), "")
	f.Fuzz(func(t *testing.T, ttl, interval int64, factor float64, extra int64, prefix string) {
		opts := []Option{WithTTL(durationOf(ttl)), WithDrift(factor, durationOf(extra)), WithKeyPrefix(prefix)}
		if interval != 0 {
			opts = append(opts, WithRenewInterval(durationOf(interval)))
		}
		cfg, err := buildConfig(opts)
		if err != nil {
			if !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("error %v is not ErrInvalidOption", err)
			}
			return
		}
		// Whatever is accepted leaves room to renew before the deadline.
		iv := cfg.renewInterval()
		if cfg.ttl < MinTTL || iv <= 0 || iv >= cfg.ttl/2 || cfg.drift(cfg.ttl) >= cfg.ttl-iv || cfg.drift(cfg.ttl) < 0 {
			t.Fatalf("accepted ttl %v interval %v drift %v", cfg.ttl, iv, cfg.drift(cfg.ttl))
		}
	})
}

func durationOf(n int64) time.Duration { return time.Duration(n) }
