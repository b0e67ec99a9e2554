package main

// The values flags and arguments take: durations, --wait, exit statuses,
// list's PATTERN, NAME and --prefix.

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	tenureinspect "github.com/tenure-go/tenure/inspect"
	"github.com/tenure-go/tenure/internal/keys"
)

// waitFlag is --wait: a duration, or "forever" (the default). 0 means one
// attempt, no waiting.
type waitFlag struct {
	d       time.Duration
	forever bool
}

func (w *waitFlag) String() string {
	if w.forever {
		return "forever"
	}
	return w.d.String()
}

func (w *waitFlag) Set(s string) error {
	d, forever, err := parseWait(s)
	if err != nil {
		return err
	}
	w.d, w.forever = d, forever
	return nil
}

func (w *waitFlag) Type() string { return "duration" }

// waitValues names what --wait accepts, for its errors.
const waitValues = `a duration with a unit ("10s", "1m", "1h30m"), 0 for one attempt, or "forever"`

// parseWait reads a --wait value: "forever" (or "inf"), or a Go duration
// that is not negative ("0" is one attempt).
func parseWait(s string) (d time.Duration, forever bool, err error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "forever", "inf", "infinity":
		return 0, true, nil
	}
	d, err = parseDuration(s)
	switch {
	case errors.Is(err, errNotDuration):
		// Say every accepted value, "forever" included, which
		// parseDuration's message does not know of.
		return 0, false, fmt.Errorf("%q is neither a duration nor \"forever\": --wait takes %s", strings.TrimSpace(s), waitValues)
	case err != nil:
		return 0, false, fmt.Errorf("%w; --wait takes %s", err, waitValues)
	}
	return d, false, nil
}

// errNotDuration marks a value that is no duration at all (not a bare
// number, nor out of range, nor negative).
var errNotDuration = errors.New("not a duration")

// parseDuration reads a duration flag: a Go duration with its unit
// ("30s", "1m30s", "500ms"), or "0". A bare number is an error rather than
// a guess at its unit: "--ttl 5" once meant 5s silently, which a reader of
// the command line may take for 5ms or 5m. Negative values are errors.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf(`%w: empty; say a number with a unit, as in "30s", "1m", "500ms"`, errNotDuration)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if f, ferr := strconv.ParseFloat(s, 64); ferr == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return 0, fmt.Errorf(`duration %q has no unit: say %q for seconds, or use "ms", "m" or "h" (as in "30s", "1m", "500ms")`, s, s+"s")
		}
		// time.ParseDuration says "invalid" for an overflow too.
		return 0, fmt.Errorf(`%q is %w: say a number with a unit, as in "30s", "1m", "500ms" (at most 2562047h)`, s, errNotDuration)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return d, nil
}

// durationFlag is a duration flag parsed by parseDuration.
type durationFlag time.Duration

func (f *durationFlag) String() string { return time.Duration(*f).String() }
func (f *durationFlag) Type() string   { return "duration" }
func (f *durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*f = durationFlag(d)
	return nil
}

// escapeGlob escapes s for a Redis MATCH pattern, so that it matches
// itself alone (package inspect's, which list's prefix goes through too).
func escapeGlob(s string) string { return tenureinspect.EscapeGlob(s) }

// checkPattern rejects a list PATTERN that Redis would not read as meant:
// its glob matcher takes an unclosed "[" for a class running to the
// pattern's end (here over the "}" that closes the name's hash tag) and a
// trailing "\" for a literal one, so either would silently match nothing,
// or not what was asked.
func checkPattern(p string) error {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			if i+1 == len(p) {
				return fmt.Errorf(`bad PATTERN %q: it ends in a backslash, which escapes nothing (write \\ for a literal backslash)`, p)
			}
			i++
		case '[':
			open := i
			i++
			if i < len(p) && p[i] == '^' {
				i++
			}
			for ; i < len(p) && p[i] != ']'; i++ {
				if p[i] == '\\' {
					i++
				}
			}
			if i >= len(p) {
				return fmt.Errorf(`bad PATTERN %q: the [ at byte %d opens a class that no ] closes (write \[ for a literal [)`, p, open)
			}
		}
	}
	return nil
}

// checkExitFlag validates an exit status flag: 1 to 255.
func checkExitFlag(flag string, code int) error {
	if code < 1 || code > 255 {
		return fail(exitUsage, "--%s %d: an exit status is 1 to 255 (0 is success)", flag, code)
	}
	return nil
}

func checkPrefix(p string) error {
	if err := keys.CheckPrefix(p); err != nil {
		return fmt.Errorf("--prefix %v", err)
	}
	return nil
}

// checkName rejects what lease would reject, as a usage error.
func checkName(name string) error {
	if err := keys.CheckName(name); err != nil {
		return fmt.Errorf("invalid NAME: %v", err)
	}
	return nil
}
