//go:build chaos && tenure_broken

package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestChaosBroken runs the real runner against a lease broken on purpose
// (the build tag tenure_broken and TENURE_BREAK, lease/broken_on.go) and
// asserts that the checker reports each break: a checker that cannot fail
// proves nothing. The faults keep the server's data, so that nothing is
// excused as expected; the seed comes from -chaos.seed or the clock.
//
//	go test -tags chaos,tenure_broken -count=1 -run TestChaosBroken ./tests/chaos -v
func TestChaosBroken(t *testing.T) {
	base := FlagConfig()
	base.duration = 20 * time.Second
	base.ttl = time.Second
	base.lossy = 0
	base.faults = "pause,restart,blackhole,gcstall" // stalls often: each break shows in a stalled holder
	base.linTimeout = 30 * time.Second
	// Sets only where a break is about them: they take a quarter of the
	// workers' loops, and the breaks of single leases show in stalled
	// holders, which sets never are.
	base.kinds = "lease,permit,rw"

	for _, c := range []struct {
		mode     string
		check    func(t *testing.T, r *Report)
		kinds    string        // when not base's
		duration time.Duration // when not base's
	}{
		// The holder never hears of its loss: it goes on past its lease
		// while another takes the name.
		{mode: "nocancel", check: func(t *testing.T, r *Report) {
			if len(r.OutlivedServer) == 0 {
				t.Error("no context outlived the server's lease")
			}
			if len(r.Overlaps) == 0 {
				t.Error("no overlap")
			}
			if r.Linearizability.Result != porcupine.Illegal {
				t.Errorf("porcupine: %v", r.Linearizability)
			}
		}},
		// The holder hears of its loss a quarter of a TTL late: after the
		// server dropped its key.
		{mode: "latecancel", check: func(t *testing.T, r *Report) {
			if len(r.OutlivedServer) == 0 {
				t.Error("no context outlived the server's lease")
			}
			if len(r.Margins) == 0 || slices.Min(r.Margins) >= 0 {
				t.Errorf("no negative server expiry - cancellation: %s", r.MarginSummary())
			}
		}},
		// Every acquisition of a name gets the same fence.
		{mode: "refence", check: func(t *testing.T, r *Report) {
			if len(r.FenceBackwards) == 0 {
				t.Error("no repeated fence")
			}
			// A stale write is accepted only when a newer holder wrote
			// first: a run whose stalled holders all wrote before any
			// newer holder (it happens under load) cannot show it.
			switch {
			case r.StaleWrites > r.StaleUnfenced && len(r.StaleAccepted) == 0:
				t.Errorf("no stale write that a fenced resource would accept, of %d written after a newer holder's", r.StaleWrites-r.StaleUnfenced)
			case r.StaleWrites == r.StaleUnfenced:
				t.Logf("no stale write came after a newer holder's this run: the stale-write rule was not exercised")
			}
			if r.Linearizability.Result != porcupine.Illegal {
				t.Errorf("porcupine: %v", r.Linearizability)
			}
		}},
		// A semaphore of n permits grants n+1.
		{mode: "overbook", check: func(t *testing.T, r *Report) {
			if !slices.ContainsFunc(r.Overlaps, func(o string) bool { return strings.Contains(o, "permits of its") }) {
				t.Errorf("no more than n live permits reported: %q", r.Overlaps)
			}
		}},
		// A request for k permits at once takes k - 1 on the server.
		{mode: "kshort", check: func(t *testing.T, r *Report) {
			if !slices.ContainsFunc(r.Overlaps, func(o string) bool { return strings.Contains(o, "permits of its") }) {
				t.Errorf("no more than n live permits reported: %q", r.Overlaps)
			}
		}},
		// A set of names held at once (lease.Manager.AcquireAll) is not
		// told when one of its leases is lost: its holder goes on working
		// on that name past its lease.
		{mode: "setnocancel", check: func(t *testing.T, r *Report) {
			if len(r.OutlivedServer) == 0 && len(r.Overlaps) == 0 {
				t.Error("no set holder reported past its lease")
			}
		}, kinds: "lease,permit,rw,set", duration: 40 * time.Second},
	} {
		t.Run(c.mode, func(t *testing.T) {
			t.Setenv("TENURE_BREAK", c.mode)
			cfg := base
			if c.kinds != "" {
				cfg.kinds = c.kinds
			}
			if c.duration != 0 {
				cfg.duration = c.duration
			}
			out := Run(t, cfg)
			r := out.Report
			t.Logf("TENURE_BREAK=%s: violations: %d overlaps, %d fences, %d outlived, %d stale writes accepted, porcupine %v; server expiry - cancellation: %s",
				c.mode, len(r.Overlaps), len(r.FenceBackwards), len(r.OutlivedServer), len(r.StaleAccepted), r.Linearizability, r.MarginSummary())
			c.check(t, r)
		})
	}
}
