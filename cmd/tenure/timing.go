package main

// The timing of a command run under a lease: the flags that run and elect
// share (--ttl, --grace, --lost-exit), and when, from the lease's local
// deadline, the command's process group gets SIGTERM and SIGKILL.

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/lease"
)

// childFlags are the flags of the subcommands that run a command.
type childFlags struct {
	ttl      durationFlag
	grace    derivedDuration
	lostExit int
}

func (f *childFlags) add(cmd *cobra.Command) {
	f.ttl = durationFlag(lease.DefaultTTL)
	cmd.Flags().Var(&f.ttl, "ttl", "the lease's TTL: renewed every TTL/3; a holder that dies frees NAME within it")
	cmd.Flags().Var(&f.grace, "grace", "how long before the lease's local deadline COMMAND gets SIGTERM (SIGKILL follows just before the deadline); "+
		"default min(10s, TTL/3), at most 7·TTL/12 − TTL/100 − 2ms")
	cmd.Flags().IntVar(&f.lostExit, "lost-exit", exitLost, "the exit status when the lease (or leadership) is lost, "+
		"or found lost at the release (1-255)")
}

func (f *childFlags) check() error {
	ttl := time.Duration(f.ttl)
	if ttl < lease.MinTTL {
		return fail(exitUsage, "--ttl %v is below the minimum %v", ttl, lease.MinTTL)
	}
	if err := checkExitFlag("lost-exit", f.lostExit); err != nil {
		return err
	}
	if f.grace.set && f.grace.d > maxGrace(ttl) {
		return fail(exitUsage, "--grace %v does not fit --ttl %v: COMMAND gets SIGTERM --grace before the lease's local deadline, "+
			"which renewals keep only TTL − TTL/3 − drift ahead, so a longer grace would signal COMMAND while the lease is healthy; "+
			"the largest --grace for --ttl %v is %v", f.grace.d, ttl, ttl, maxGrace(ttl))
	}
	return nil
}

// timing returns when, relative to the local deadline, COMMAND is signalled.
func (f *childFlags) timing() stopTiming {
	ttl := time.Duration(f.ttl)
	t := stopTiming{grace: defaultGrace(ttl), killMargin: killMargin(ttl), stoppedFor: ttl}
	if f.grace.set {
		t.grace = f.grace.d
	}
	return t
}

// derivedDuration is a duration flag whose default depends on --ttl
// (--grace, --release-timeout): remembered as set or not.
type derivedDuration struct {
	d   time.Duration
	set bool
}

// String is empty while unset, so that --help shows the usage's
// TTL-dependent default and not a misleading constant.
func (f *derivedDuration) String() string {
	if !f.set {
		return ""
	}
	return f.d.String()
}

func (f *derivedDuration) Type() string { return "duration" }

func (f *derivedDuration) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	f.d, f.set = d, true
	return nil
}

// The timing of a command's stop. The lease renews every TTL/3 (lease's
// default, which the CLI does not change) and its local deadline is the
// renewal's send time + TTL − drift, drift = TTL/100 + 2ms (lease's
// defaults). So while renewals succeed, the deadline is between
// TTL − TTL/3 − drift and TTL − drift ahead, and a SIGTERM sent at
// (deadline − grace) must not come due in that state.

// maxDefaultGrace is the default --grace for long TTLs, as before the
// default came to depend on the TTL.
const maxDefaultGrace = 10 * time.Second

func renewInterval(ttl time.Duration) time.Duration { return ttl / 3 }

func drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*lease.DefaultDriftFactor) + lease.DefaultDriftExtra
}

// maxGrace is the longest --grace for ttl: TTL − renew interval − drift −
// renew interval/4 = 7·TTL/12 − TTL/100 − 2ms. The last quarter interval
// is headroom for a renewal's round trip and a busy scheduler: a renewal
// whose reply is up to TTL/12 late does not get COMMAND signalled.
func maxGrace(ttl time.Duration) time.Duration {
	ri := renewInterval(ttl)
	return ttl - ri - drift(ttl) - ri/4
}

// defaultGrace is min(10s, TTL/3): 10s, as before, for the default 30s TTL,
// and below maxGrace for every TTL from lease.MinTTL up (TTL/3 ≤
// 7·TTL/12 − TTL/100 − 2ms holds from TTL ≈ 8.4ms).
func defaultGrace(ttl time.Duration) time.Duration { return min(maxDefaultGrace, ttl/3) }

// killMargin is how long before the local deadline SIGKILL is sent:
// min(TTL/10, 200ms). The drift already separates the local deadline from
// the key's expiry on the server; this margin is for tenure's own timer to
// fire late on a loaded machine and the signal to land, so that the group
// is dead by the deadline itself. It stays small next to the default
// grace (TTL/3) for short TTLs, and is capped because for long ones only a
// late timer needs it.
func killMargin(ttl time.Duration) time.Duration { return min(ttl/10, 200*time.Millisecond) }

// stopTiming says when a command is stopped: SIGTERM grace before the
// lease's local deadline (or at once when the lease is lost), SIGKILL
// killMargin before it; and SIGKILL when it has stayed stopped (SIGSTOP,
// SIGTTIN, SIGTTOU) for stoppedFor, the TTL: as long as a dead holder
// keeps the name.
type stopTiming struct {
	grace, killMargin time.Duration
	stoppedFor        time.Duration
}

// at returns when, for the local deadline dl, SIGTERM and SIGKILL come
// due; never SIGTERM after SIGKILL.
func (t stopTiming) at(dl time.Time) (termAt, killAt time.Time) {
	killAt = dl.Add(-t.killMargin)
	termAt = dl.Add(-t.grace)
	if killAt.Before(termAt) {
		termAt = killAt
	}
	return termAt, killAt
}
