package backend

import (
	"sync/atomic"
	"testing"
	"time"
)

// A TTL reaches a script in whole milliseconds rounded up, never below
// the duration the local deadline counts (S2).
func TestMillisecondsRoundUp(t *testing.T) {
	var box atomic.Pointer[msBox]
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{
		{0, 0},
		{time.Nanosecond, 1},
		{999 * time.Microsecond, 1},
		{time.Millisecond, 1},
		{time.Second, 1000},
		{time.Second + time.Nanosecond, 1001},
		{time.Second + 700*time.Microsecond, 1001},
		{30 * time.Second, 30000},
	} {
		if got := ms(c.d); got != c.want {
			t.Errorf("ms(%v) = %d, want %d", c.d, got, c.want)
		}
		if got := msArg(&box, c.d); got != c.want {
			t.Errorf("msArg(%v) = %v, want %d", c.d, got, c.want)
		}
	}
}
