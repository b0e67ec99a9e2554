// Package examplecmd holds what every example command shares besides its
// Redis: main's signal handling and exit status, the timestamped narrative,
// and a stand-in for a step of real work. None of it is what an example is
// about, so it lives here, out of the reader's way.
package examplecmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"time"
)

// Main runs an example: run gets a context that Ctrl-C cancels, stdout for
// the narrative and stderr for the library's log. If run fails, Main prints
// the error after the example's name and exits 1.
func Main(name string, run func(ctx context.Context, out, logOut io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Say prints a line of the narrative, like fmt.Printf.
type Say func(format string, args ...any)

// Narrator returns a Say writing to w, safe for concurrent use, that stamps
// each line with the seconds since start, to the given resolution (10ms or
// 1ms: an example whose events are milliseconds apart asks for the finer).
func Narrator(w io.Writer, start time.Time, resolution time.Duration) Say {
	decimals := 0
	for r := time.Second; r > resolution && decimals < 9; r /= 10 {
		decimals++
	}
	var mu sync.Mutex
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		// The width keeps the stamps aligned up to 99s: "%5.2fs", "%6.3fs".
		fmt.Fprintf(w, "%*.*fs  %s\n", decimals+3, decimals, time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
}

// Work stands for a step of real work taking d. It stops as soon as ctx is
// done and returns the cause, as work that heeds its context would.
func Work(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
