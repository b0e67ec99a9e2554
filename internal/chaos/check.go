package chaos

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what Check found. The first four lists are violations; the
// Expected ones follow a restart that lost the server's data, where S1 does
// not hold by design, and do not fail a run.
type Report struct {
	Overlaps        []string // two live holders of one name
	FenceBackwards  []string // a fence not above every earlier one of its name
	OutlivedServer  []string // a lease context live after the server dropped the lease
	StaleAccepted   []string // a write accepted with a fence below one accepted before
	ExpectedOverlap []string // overlaps after a data-losing restart
	ExpectedOutlive []string // server-side losses caused by a data-losing restart

	Sections       int
	SectionsByEnd  map[Ending]int
	Stalled        int
	WritesAccepted int
	WritesRejected int
	StaleRejected  int // writes of stalled holders, rejected as they should be
	StaleLate      int // writes of stalled holders accepted: no newer holder had written yet
	FaultsByKind   map[string]int
	// Cancellations after the local deadline: not violations by
	// themselves (the drift margin absorbs a little lateness), but the
	// scheduler slack the run suffered.
	LateCancels int
	MaxLate     time.Duration
}

// Violations is the number of violations: a run with any fails.
func (r *Report) Violations() int {
	return len(r.Overlaps) + len(r.FenceBackwards) + len(r.OutlivedServer) + len(r.StaleAccepted)
}

// Check validates h.
func Check(h History) *Report {
	r := &Report{SectionsByEnd: map[Ending]int{}, FaultsByKind: map[string]int{}}
	r.Sections = len(h.Sections)
	for _, s := range h.Sections {
		r.SectionsByEnd[s.Ended]++
		if s.Stalled {
			r.Stalled++
		}
		if !s.Deadline.IsZero() && s.End.After(s.Deadline) {
			r.LateCancels++
			r.MaxLate = max(r.MaxLate, s.End.Sub(s.Deadline))
		}
	}
	for _, f := range h.Faults {
		r.FaultsByKind[f.Kind]++
	}
	var losses []Fault
	for _, f := range h.Faults {
		if f.LosesData {
			losses = append(losses, f)
		}
	}
	// dataLost reports whether a data-losing restart may have erased a
	// lease granted at granted (by when its Acquire returned) before after:
	// the server was killed no later than after, and came back no earlier
	// than granted.
	dataLost := func(granted, after time.Time) bool {
		for _, f := range losses {
			if !granted.After(f.End) && !f.Start.After(after) {
				return true
			}
		}
		return false
	}

	byName := map[string][]Section{}
	for _, s := range h.Sections {
		byName[s.Name] = append(byName[s.Name], s)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)

	for _, name := range names {
		ss := byName[name]
		slices.SortStableFunc(ss, func(a, b Section) int { return a.Start.Compare(b.Start) })
		var longest time.Duration
		for _, s := range ss {
			longest = max(longest, s.End.Sub(s.Start))
		}
		// Overlaps: every earlier section still live when this one began.
		for i, b := range ss {
			for j := i - 1; j >= 0 && !ss[j].Start.Before(b.Start.Add(-longest)); j-- {
				a := ss[j]
				if !a.End.After(b.Start) {
					continue
				}
				msg := fmt.Sprintf("%s: %s (section %d, fence %d) began at %s while %s (section %d, fence %d, %s, local deadline %s) was live until %s, %v later%s",
					name, b.Holder, b.ID, b.Fence, stamp(b.Start), a.Holder, a.ID, a.Fence, a.Ended, stamp(a.Deadline), stamp(a.End), a.End.Sub(b.Start), faultsAround(h.Faults, a.Start, b.Start))
				if dataLost(a.Start, b.Start) {
					r.ExpectedOverlap = append(r.ExpectedOverlap, msg)
				} else {
					r.Overlaps = append(r.Overlaps, msg)
				}
			}
		}
		// Fences: strictly increasing in the order of acquisition.
		var (
			top   int64
			topID int
		)
		for _, s := range ss {
			if s.Fence == 0 {
				continue // unknown (Do)
			}
			if s.Fence <= top {
				r.FenceBackwards = append(r.FenceBackwards, fmt.Sprintf("%s: section %d (%s) got fence %d at %s, after section %d had fence %d",
					name, s.ID, s.Holder, s.Fence, stamp(s.Start), topID, top))
			} else {
				top, topID = s.Fence, s.ID
			}
		}
	}

	// Contexts that outlived the lease on the server.
	gone := map[string]Sighting{}
	for _, g := range h.Sightings {
		if !g.GoneBy.IsZero() {
			gone[g.Token] = g
		}
	}
	for _, s := range h.Sections {
		if s.UnnoticedLoss {
			msg := fmt.Sprintf("%s: section %d (%s, fence %d, from %s) was live at %s (local deadline %s) but Release found the lease gone from the server%s",
				s.Name, s.ID, s.Holder, s.Fence, stamp(s.Start), stamp(s.End), stamp(s.Deadline), faultsAround(h.Faults, s.Start, s.End))
			if dataLost(s.Start, s.End) {
				r.ExpectedOutlive = append(r.ExpectedOutlive, msg)
			} else {
				r.OutlivedServer = append(r.OutlivedServer, msg)
			}
			continue
		}
		g, ok := gone[s.Token]
		if s.Token == "" || !ok || !s.End.After(g.GoneBy) {
			continue
		}
		msg := fmt.Sprintf("%s: section %d (%s, fence %d, from %s) was live until %s (local deadline %s), %v after the observer saw its lease gone from the server (last seen %s)%s",
			s.Name, s.ID, s.Holder, s.Fence, stamp(s.Start), stamp(s.End), stamp(s.Deadline), s.End.Sub(g.GoneBy), stamp(g.LastSeen), faultsAround(h.Faults, s.Start, s.End))
		if dataLost(s.Start, g.GoneBy) {
			r.ExpectedOutlive = append(r.ExpectedOutlive, msg)
		} else {
			r.OutlivedServer = append(r.OutlivedServer, msg)
		}
	}

	// The fenced resource: in the order it decided, no accepted write may
	// carry a fence below one accepted before it for the same name.
	writes := slices.Clone(h.Writes)
	slices.SortStableFunc(writes, func(a, b Write) int { return cmp.Compare(a.Seq, b.Seq) })
	highest := map[string]Write{}
	for _, w := range writes {
		switch {
		case w.Accepted:
			r.WritesAccepted++
			if w.Stale {
				r.StaleLate++
			}
		default:
			r.WritesRejected++
			if w.Stale {
				r.StaleRejected++
			}
		}
		if !w.Accepted {
			continue
		}
		if top, ok := highest[w.Name]; ok && w.Fence < top.Fence {
			r.StaleAccepted = append(r.StaleAccepted, fmt.Sprintf("%s: write of section %d with fence %d accepted at %s after fence %d (section %d) was accepted at %s",
				w.Name, w.Section, w.Fence, stamp(w.At), top.Fence, top.Section, stamp(top.At)))
			continue
		}
		highest[w.Name] = w
	}
	return r
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return t.Format("15:04:05.000000")
}

// faultsAround lists the faults that overlapped [from, to], for a
// violation's message.
func faultsAround(faults []Fault, from, to time.Time) string {
	var b strings.Builder
	for _, f := range faults {
		if !f.Start.After(to) && !f.End.Before(from) {
			fmt.Fprintf(&b, "; during %s %s..%s", f.Kind, stamp(f.Start), stamp(f.End))
		}
	}
	return b.String()
}

// Stats are the run's own counts, printed with a report.
type Stats struct {
	Rows [][2]string // label, value, in order
}

// Add appends a row.
func (s *Stats) Add(label string, format string, a ...any) {
	s.Rows = append(s.Rows, [2]string{label, fmt.Sprintf(format, a...)})
}

// Print writes the summary table: the run's counts, the faults by kind and
// every violation count, then the first few violations of each kind.
func (r *Report) Print(w io.Writer, stats *Stats) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	row := func(label string, v any) { fmt.Fprintf(tw, "%s\t %v\t\n", label, v) }
	if stats != nil {
		for _, x := range stats.Rows {
			row(x[0], x[1])
		}
	}
	row("critical sections", r.Sections)
	for _, e := range []Ending{EndReleased, EndLost, EndClosed, EndUnknown} {
		if n := r.SectionsByEnd[e]; n > 0 || e != EndUnknown {
			row("  ended "+e.String(), n)
		}
	}
	row("  stalled past their lease", r.Stalled)
	row("  context cancelled after the local deadline", fmt.Sprintf("%d (at most %v late)", r.LateCancels, r.MaxLate.Round(time.Microsecond)))
	row("fenced writes accepted", r.WritesAccepted)
	row("fenced writes rejected", r.WritesRejected)
	row("  stale writes rejected", r.StaleRejected)
	row("  stale writes accepted, no newer fence yet", r.StaleLate)
	kinds := make([]string, 0, len(r.FaultsByKind))
	for k := range r.FaultsByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	total := 0
	for _, k := range kinds {
		total += r.FaultsByKind[k]
	}
	row("faults injected", total)
	for _, k := range kinds {
		row("  "+k, r.FaultsByKind[k])
	}
	row("VIOLATIONS: overlapping live holders", len(r.Overlaps))
	row("VIOLATIONS: fences not increasing", len(r.FenceBackwards))
	row("VIOLATIONS: context outlived server lease", len(r.OutlivedServer))
	row("VIOLATIONS: stale writes accepted", len(r.StaleAccepted))
	row("expected (data-losing restart): overlaps", len(r.ExpectedOverlap))
	row("expected (data-losing restart): outlived", len(r.ExpectedOutlive))
	_ = tw.Flush()
	for _, l := range []struct {
		what string
		list []string
	}{
		{"overlap", r.Overlaps}, {"fence", r.FenceBackwards}, {"outlived", r.OutlivedServer}, {"stale write", r.StaleAccepted},
		{"expected overlap", r.ExpectedOverlap}, {"expected outlived", r.ExpectedOutlive},
	} {
		for i, m := range l.list {
			if i == 10 {
				fmt.Fprintf(w, "%s: ... %d more\n", l.what, len(l.list)-i)
				break
			}
			fmt.Fprintf(w, "%s: %s\n", l.what, strings.TrimSpace(m))
		}
	}
}
