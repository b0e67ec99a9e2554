package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
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

// parseWait reads a --wait value: "forever" (or "inf"), or a Go duration
// that is not negative ("0" is one attempt).
func parseWait(s string) (d time.Duration, forever bool, err error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "forever", "inf", "infinity":
		return 0, true, nil
	}
	d, err = parseDuration(s)
	return d, false, err
}

// parseDuration reads a duration flag: a Go duration ("1m30s", "500ms"), or
// a bare number of seconds ("0", "2", "1.5"). Negative values are errors.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty duration")
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || math.IsNaN(secs) || math.IsInf(secs, 0) {
			return 0, fmt.Errorf("%q is not a duration (say 30s, 1m, 500ms)", s)
		}
		if math.Abs(secs) >= float64(math.MaxInt64)/float64(time.Second) {
			return 0, fmt.Errorf("duration %q is out of range", s)
		}
		d = time.Duration(secs * float64(time.Second))
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
// itself only.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^-`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
