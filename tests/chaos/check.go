package chaos

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what Check found. The first four lists are violations, and so is
// a history porcupine proves not linearizable; the Expected ones follow a
// fault that brought the server back without data it had acknowledged, and
// the Starved ones a late cancellation while the runner's process was not
// scheduled: S1 does not hold there by design, and they do not fail a run.
type Report struct {
	Overlaps       []string // two live holders of one name
	FenceBackwards []string // a fence not above every earlier one of its name
	OutlivedServer []string // a lease context live after the server dropped the lease
	StaleAccepted  []string // a stale write a correct fenced resource would have accepted
	// StaleCommitted: a stale write a real fenced resource (History.Guarded)
	// took although a newer holder had written a larger fence before it.
	StaleCommitted  []string
	ExpectedOverlap []string // overlaps after a data-losing fault
	ExpectedOutlive []string // server-side losses caused by a data-losing fault
	StarvedOverlap  []string // overlaps while the runner was not scheduled
	StarvedOutlive  []string // contexts cancelled late while the runner was not scheduled
	// BlindOutlive: contexts live past the last expiry the observer read,
	// but ended before the observer next saw the server, after a gap in
	// its polls long enough to miss a renewal: when the server dropped the
	// lease is unknown, so neither a violation nor a pass.
	BlindOutlive []string

	// Linearizability is CheckLinearizable's verdict, when the caller ran it.
	Linearizability LinResult

	Sections      int
	SectionsByEnd map[Ending]int
	// SectionsByKind counts the sections of each kind of lock, and
	// PeakShared the most permits (of a semaphore) or readers (of a
	// read-write lock) live at once on each such name: whether the run
	// contended for them at all.
	SectionsByKind map[Kind]int
	PeakShared     map[string]int
	Stalled        int
	Writes         int
	StalledWrites  int
	// Stale writes: the writer had been superseded, a newer holder of the
	// name was granted before the write.
	StaleWrites int
	// ... of which a correct fenced resource rejects: a newer holder had
	// written a larger fence first.
	StaleRejectable int
	// ... of which any fenced resource accepts, which fencing cannot help:
	// no newer holder had written yet.
	StaleUnfenced int
	// Refused counts the writes a real fenced resource refused as stale.
	Refused      int
	FaultsByKind map[string]int
	// Cancellations after the local deadline: not violations by
	// themselves (the drift margin absorbs a little lateness), but the
	// scheduler slack the run suffered.
	LateCancels int
	MaxLate     time.Duration
	// Margins holds, for each section that ended lost, how long before the
	// server dropped its lease its context was cancelled (server expiry -
	// cancellation); negative ones are violations (OutlivedServer). Sections
	// in the window of a data-losing fault are left out.
	Margins []time.Duration
	// MarginUnknown counts lost sections whose lease the observer never saw
	// on the server (lost within a poll, or while the observer could not
	// reach the server).
	MarginUnknown int
	// Anachronisms lists acquisitions whose fence, which is at least the
	// server's clock when it granted the name (max(counter + 1, TIME)), is
	// older than the moment the holder called Acquire: the server granted
	// the name before it was asked, so the answer belongs to an earlier
	// request, or the host's wall clock moved. Not a violation by itself,
	// but what explains a lease whose local deadline outruns the server's
	// expiry; the 30-minute run that found such leases is why it is counted.
	Anachronisms []string
	// Suspects are the IDs of the sections in violations, in order, each
	// once: a run prints what it knows of them.
	Suspects []int
}

func (r *Report) suspect(ids ...int) {
	for _, id := range ids {
		if !slices.Contains(r.Suspects, id) {
			r.Suspects = append(r.Suspects, id)
		}
	}
}

// anachronismSlack absorbs the difference between the runner's and the
// server's readings of one host clock.
const anachronismSlack = 2 * time.Millisecond

// Violations is the number of violations: a run with any fails.
func (r *Report) Violations() int {
	n := len(r.Overlaps) + len(r.FenceBackwards) + len(r.OutlivedServer) + len(r.StaleAccepted) + len(r.StaleCommitted)
	if r.Linearizability.Failed() {
		n++
	}
	return n
}

// Check validates h: each name's sections against the rules of its kind
// (overlaps, fences), every section against the server's lease (outlived),
// and the writes against the fences.
func Check(h History) *Report {
	c := newChecker(h)
	byName := map[string][]Section{}
	for _, s := range h.Sections {
		byName[s.Name] = append(byName[s.Name], s)
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		ss := byName[name]
		slices.SortStableFunc(ss, func(a, b Section) int { return a.Start.Compare(b.Start) })
		c.checkOverlaps(name, ss)
		if slices.ContainsFunc(ss, func(s Section) bool { return !s.Kind.exclusive() }) {
			c.r.checkSharedFences(name, ss, c.losses)
		} else {
			c.checkFences(name, ss)
		}
	}
	c.checkOutlived()
	// Only leases and writers write: their sections alone supersede one
	// another at the fenced resource.
	writers := map[string][]Section{}
	for name, ss := range byName {
		for _, s := range ss {
			if s.Kind.exclusive() {
				writers[name] = append(writers[name], s)
			}
		}
	}
	c.r.checkWrites(h, writers)
	return c.r
}

// A checker is one Check: the report it fills and the faults that excuse
// what no library could have prevented.
type checker struct {
	r       *Report
	h       History
	losses  []Fault // data-losing faults
	starved []Fault // windows in which the runner was not scheduled
}

// newChecker tallies h into a new report, with its anachronisms.
func newChecker(h History) *checker {
	c := &checker{h: h, r: &Report{SectionsByEnd: map[Ending]int{}, FaultsByKind: map[string]int{}, SectionsByKind: map[Kind]int{}, PeakShared: map[string]int{}}}
	r := c.r
	r.Sections = len(h.Sections)
	for _, s := range h.Sections {
		r.SectionsByEnd[s.Ended]++
		r.SectionsByKind[s.Kind]++
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
		if f.LosesData {
			c.losses = append(c.losses, f)
		}
		if f.Starved {
			c.starved = append(c.starved, f)
		}
	}
	for _, s := range h.Sections {
		// A fence below 2^50 us (2005) is no clock reading (a test's small
		// numbers, or a counter set by hand).
		if s.Fence < 1<<50 || s.Called.IsZero() {
			continue
		}
		if granted := time.UnixMicro(s.Fence); granted.Before(s.Called.Add(-anachronismSlack)) {
			r.Anachronisms = append(r.Anachronisms, fmt.Sprintf("%s: section %d (%s) called Acquire at %s and got fence %d, the server's clock %v earlier%s",
				s.Name, s.ID, s.Holder, stamp(s.Called), s.Fence, s.Called.Sub(granted), faultsAround(h.Faults, granted, s.Start)))
		}
	}
	return c
}

// starvedIn reports whether the runner went unscheduled, longer than the
// slack, at some point of [from, to]: a cancellation due then could not
// land in time, whatever the library did.
func (c *checker) starvedIn(from, to time.Time) bool {
	for _, f := range c.starved {
		if !f.End.Before(from) && !f.Start.After(to) {
			return true
		}
	}
	return false
}

// dataLost reports whether a data-losing fault may have erased a lease
// granted at granted (by when its Acquire returned) before after: the
// server went down no later than after, and came back no earlier than
// granted.
func (c *checker) dataLost(granted, after time.Time) bool {
	for _, f := range c.losses {
		if !granted.After(f.End) && !f.Start.After(after) {
			return true
		}
	}
	return false
}

// checkOverlaps finds, for each section of name (ss, by start), every
// earlier section still live when it began that may not be beside it; and
// for a permit, more live permits than its n, a hold of k counting k.
func (c *checker) checkOverlaps(name string, ss []Section) {
	r, h := c.r, c.h
	var longest time.Duration
	for _, s := range ss {
		longest = max(longest, s.End.Sub(s.Start))
	}
	for i, b := range ss {
		var permits []Section // other permits live when b began
		shared := 0           // other permits or readers live then
		for j := i - 1; j >= 0 && !ss[j].Start.Before(b.Start.Add(-longest)); j-- {
			a := ss[j]
			if !a.End.After(b.Start) {
				continue
			}
			if !a.Kind.exclusive() && !b.Kind.exclusive() {
				shared++
				if a.Kind == KindPermit && b.Kind == KindPermit {
					permits = append(permits, a)
				}
				continue
			}
			msg := fmt.Sprintf("%s: %s (section %d, %s, fence %d) began at %s while %s (section %d, %s, fence %d, %s, local deadline %s) was live until %s, %v later%s",
				name, b.Holder, b.ID, b.Kind, b.Fence, stamp(b.Start), a.Holder, a.ID, a.Kind, a.Fence, a.Ended, stamp(a.Deadline), stamp(a.End), a.End.Sub(b.Start), faultsAround(h.Faults, a.Start, b.Start))
			r.overlap(msg, c.dataLost(a.Start, b.Start), c.starvedIn(b.Start, a.End), a.ID, b.ID)
		}
		if !b.Kind.exclusive() {
			r.PeakShared[name] = max(r.PeakShared[name], shared+1)
		}
		held := 0 // permits live when b began, k for a hold of k
		for _, a := range permits {
			held += a.permits()
		}
		if b.Kind != KindPermit || held+b.permits() <= b.Limit {
			continue
		}
		// Blame the permit that outlived the others: the one whose
		// cancellation came last.
		last := slices.MaxFunc(permits, func(x, y Section) int { return x.End.Compare(y.End) })
		ids := []int{b.ID}
		var expected bool
		for _, a := range permits {
			ids = append(ids, a.ID)
			expected = expected || c.dataLost(a.Start, b.Start)
		}
		msg := fmt.Sprintf("%s: %s (section %d, fence %d, %d at once) began at %s while %d permits of its %d were live, the last of them %s (section %d, fence %d, %s, local deadline %s) until %s%s",
			name, b.Holder, b.ID, b.Fence, b.permits(), stamp(b.Start), held, b.Limit, last.Holder, last.ID, last.Fence, last.Ended, stamp(last.Deadline), stamp(last.End), faultsAround(h.Faults, last.Start, b.Start))
		r.overlap(msg, expected, c.starvedIn(b.Start, last.End), ids...)
	}
}

// checkFences finds the fences of an exclusive name (ss, by start) that do
// not strictly increase in the order of acquisition.
func (c *checker) checkFences(name string, ss []Section) {
	var (
		top   int64
		topID int
	)
	for _, s := range ss {
		if s.Fence == 0 {
			continue // unknown
		}
		if s.Fence <= top {
			prev := ss[slices.IndexFunc(ss, func(x Section) bool { return x.ID == topID })]
			c.r.FenceBackwards = append(c.r.FenceBackwards, fmt.Sprintf("%s: section %d (%s) got fence %d at %s, after section %d had fence %d%s",
				name, s.ID, s.Holder, s.Fence, stamp(s.Start), topID, top, faultsAround(c.losses, prev.Start, s.Start)))
		} else {
			top, topID = s.Fence, s.ID
		}
	}
}

// checkOutlived finds the sections whose holders believed past the lease
// on the server: a Release that found it gone while the context was live,
// or a section that ended after the observer saw its key dropped.
func (c *checker) checkOutlived() {
	seen := map[string][]Sighting{}
	for _, g := range c.h.Sightings {
		seen[g.Token] = append(seen[g.Token], g)
	}
	for _, s := range c.h.Sections {
		if s.UnnoticedLoss {
			c.unnoticedLoss(s)
			continue
		}
		c.outlived(s, seen[s.Token])
	}
}

// unnoticedLoss judges s, whose Release found the lease gone while its
// context was live.
func (c *checker) unnoticedLoss(s Section) {
	msg := fmt.Sprintf("%s: section %d (%s, fence %d, from %s) was live at %s (local deadline %s) but Release found the lease gone from the server%s",
		s.Name, s.ID, s.Holder, s.Fence, stamp(s.Start), stamp(s.End), stamp(s.Deadline), faultsAround(c.h.Faults, s.Start, s.End))
	if c.dataLost(s.Start, s.End) {
		c.r.ExpectedOutlive = append(c.r.ExpectedOutlive, msg)
		return
	}
	c.r.OutlivedServer = append(c.r.OutlivedServer, msg)
	c.r.suspect(s.ID)
}

// outlived judges s against the observer's sightings of its token: its
// margin (when the server dropped the lease, less when the holder stopped
// believing) and, when that is negative, whether a fault excuses it.
func (c *checker) outlived(s Section, sightings []Sighting) {
	r := c.r
	g, ok := appearanceAt(sightings, s.Start)
	dropped, how := g.dropped()
	if s.Token == "" || !ok || dropped.IsZero() {
		if s.Ended == EndLost {
			r.MarginUnknown++
		}
		return
	}
	margin := dropped.Sub(s.End)
	if margin < 0 && g.blind() {
		// A renewal in the observer's gap would have moved the expiry
		// unseen: all it knows is that the key was gone by GoneBy.
		if !s.End.After(g.GoneBy) {
			if s.Ended == EndLost {
				r.MarginUnknown++
			}
			r.BlindOutlive = append(r.BlindOutlive, fmt.Sprintf("%s: section %d (%s, %s) was live until %s, after the expiry read last (%s, read at %s) but before the observer's next look (%s)",
				s.Name, s.ID, s.Holder, s.Ended, stamp(s.End), stamp(g.ExpiresAt), stamp(g.LastSeen), stamp(g.GoneBy)))
			return
		}
		dropped, how = g.GoneBy, "the observer saw its key gone (after a gap in its polls)"
		margin = dropped.Sub(s.End)
	}
	expected := c.dataLost(s.Start, dropped)
	late := margin < 0 && c.starvedIn(dropped, s.End)
	if s.Ended == EndLost && !expected && !late {
		r.Margins = append(r.Margins, margin)
	}
	if margin >= 0 {
		return
	}
	msg := fmt.Sprintf("%s: section %d (%s, fence %d, %s, from %s) was live until %s (local deadline %s), %v after %s at %s (last seen %s)%s",
		s.Name, s.ID, s.Holder, s.Fence, s.Ended, stamp(s.Start), stamp(s.End), stamp(s.Deadline), -margin, how, stamp(dropped), stamp(g.LastSeen), faultsAround(c.h.Faults, s.Start, s.End))
	switch {
	case expected:
		r.ExpectedOutlive = append(r.ExpectedOutlive, msg)
	case late:
		r.StarvedOutlive = append(r.StarvedOutlive, msg)
	default:
		r.OutlivedServer = append(r.OutlivedServer, msg)
		r.suspect(s.ID)
	}
}

// overlap files an overlap of the sections ids: expected after a
// data-losing fault, starved while the runner was not scheduled, and a
// violation otherwise.
func (r *Report) overlap(msg string, expected, starved bool, ids ...int) {
	switch {
	case expected:
		r.ExpectedOverlap = append(r.ExpectedOverlap, msg)
	case starved:
		r.StarvedOverlap = append(r.StarvedOverlap, msg)
	default:
		r.Overlaps = append(r.Overlaps, msg)
		r.suspect(ids...)
	}
}

// checkSharedFences checks the fences of a name whose holders may overlap
// (a semaphore's permits, a read-write lock's readers), where the order of
// Starts is not the order of grants: no fence is handed out twice, and a
// section granted after another ended (its Acquire called later) has the
// larger fence.
func (r *Report) checkSharedFences(name string, ss []Section, losses []Fault) {
	by := map[int64]Section{}
	var known []Section
	for _, s := range ss {
		if s.Fence == 0 {
			continue
		}
		if o, dup := by[s.Fence]; dup {
			r.FenceBackwards = append(r.FenceBackwards, fmt.Sprintf("%s: sections %d (%s) and %d (%s) both got fence %d%s",
				name, o.ID, o.Holder, s.ID, s.Holder, s.Fence, faultsAround(losses, o.Start, s.Start)))
			continue
		}
		by[s.Fence] = s
		known = append(known, s)
	}
	called := func(s Section) time.Time {
		if s.Called.IsZero() {
			return s.Start
		}
		return s.Called
	}
	byEnd := slices.Clone(known)
	slices.SortFunc(byEnd, func(a, b Section) int { return a.End.Compare(b.End) })
	slices.SortFunc(known, func(a, b Section) int { return called(a).Compare(called(b)) })
	var top Section
	k := 0
	for _, b := range known {
		for ; k < len(byEnd) && byEnd[k].End.Before(called(b)); k++ {
			if byEnd[k].Fence > top.Fence {
				top = byEnd[k]
			}
		}
		if top.Fence != 0 && b.Fence <= top.Fence {
			r.FenceBackwards = append(r.FenceBackwards, fmt.Sprintf("%s: section %d (%s) called Acquire at %s and got fence %d, not above fence %d of section %d (%s), which had ended at %s%s",
				name, b.ID, b.Holder, stamp(called(b)), b.Fence, top.Fence, top.ID, top.Holder, stamp(top.End), faultsAround(losses, top.Start, b.Start)))
		}
	}
}

// appearanceAt picks, of a token's appearances on the server, the one a
// section that started at start held: the first still there at start (not
// seen gone by then). The observer may see it only a poll after the section
// began; but if it was seen gone before start and back only well after
// (more than observerBlind), the server did not have it when the section
// began, and the appearance that ended before start is the one to judge.
func appearanceAt(gs []Sighting, start time.Time) (Sighting, bool) {
	if len(gs) == 0 {
		return Sighting{}, false
	}
	slices.SortFunc(gs, func(a, b Sighting) int { return a.FirstSeen.Compare(b.FirstSeen) })
	for i, g := range gs {
		if g.GoneBy.IsZero() || g.GoneBy.After(start) {
			if i > 0 && g.FirstSeen.After(start.Add(observerBlind)) {
				return gs[i-1], true
			}
			return g, true
		}
	}
	return gs[len(gs)-1], true
}

// observerBlind is how long the observer may go between a sighting of a key
// and its next look before a renewal could have slipped in unseen: its
// polls come a millisecond or two apart when they succeed.
const observerBlind = 25 * time.Millisecond

// blind reports whether the observer read g's expiry last, then did not
// look again for longer than observerBlind and found the key gone: the
// expiry it read may have been renewed in between.
func (g Sighting) blind() bool {
	return !g.GoneBy.IsZero() && !g.ExpiresAt.IsZero() && g.ExpiresAt.Before(g.GoneBy) && g.GoneBy.Sub(g.LastSeen) > observerBlind
}

// dropped returns the earliest moment the server could have let another
// holder in, as the observer saw it: when the key's TTL ran out, unless the
// key was seen gone (deleted, replaced, lost) before that. It is zero when
// the observer knows neither.
func (g Sighting) dropped() (time.Time, string) {
	switch {
	case !g.ExpiresAt.IsZero() && (g.GoneBy.IsZero() || g.ExpiresAt.Before(g.GoneBy)):
		return g.ExpiresAt, "its key's TTL ran out on the server"
	case !g.GoneBy.IsZero():
		return g.GoneBy, "the observer saw its key gone"
	}
	return time.Time{}, ""
}

// checkWrites judges every write against the fences granted before it. A
// write is stale when its section had been superseded: a section of the
// same name granted after it had been granted before the write. A fenced
// resource keeps the largest fence it has accepted and rejects smaller ones;
// it can reject a stale write only if a newer holder wrote first, and does
// only if that holder's fence is larger. So a stale write is a violation
// when some newer holder had written before it and none of those newer
// holders' fences exceeds the stale write's: a correct resource would take
// it and let the superseded holder overwrite the newer one's work. Stale
// writes with no newer write before them are counted apart: any fenced
// resource accepts them, and only the lease's timing (S1) protects them.
func (r *Report) checkWrites(h History, byName map[string][]Section) {
	type ranked struct {
		s    Section
		rank int // position in the name's order of acquisition
	}
	sections := map[int]ranked{}
	for _, ss := range byName { // already sorted by Start
		for i, s := range ss {
			sections[s.ID] = ranked{s, i}
		}
	}
	// A real resource's refusals wrote nothing: they are counted, and
	// judged by nobody (the resource may refuse what was stale only as of
	// a write this history orders after it).
	writes := slices.DeleteFunc(slices.Clone(h.Writes), func(w Write) bool {
		if w.Refused {
			r.Refused++
		}
		return w.Refused
	})
	slices.SortStableFunc(writes, func(a, b Write) int { return cmp.Compare(a.Seq, b.Seq) })
	// Per name, the largest fence written so far by each rank's section,
	// queried over the ranks after the writer's: a Fenwick tree for suffix
	// maxima keeps a long run's check linear-logarithmic.
	newest := map[string]*suffixMax{}
	for _, w := range writes {
		r.Writes++
		if w.Stalled {
			r.StalledWrites++
		}
		me, ok := sections[w.Section]
		if !ok || w.Fence == 0 {
			continue
		}
		ss := byName[w.Name]
		t := newest[w.Name]
		if t == nil {
			t = newSuffixMax(len(ss))
			newest[w.Name] = t
		}
		if me.rank+1 < len(ss) && ss[me.rank+1].Start.Before(w.At) {
			r.StaleWrites++
			top, by := t.after(me.rank)
			switch {
			case by < 0:
				r.StaleUnfenced++
			case top > w.Fence && h.Guarded:
				n := ss[by]
				r.StaleCommitted = append(r.StaleCommitted, fmt.Sprintf("%s: the resource took the write of section %d (%s, fence %d, granted %s) at %s, after section %d (%s, granted %s) had written its fence %d%s",
					w.Name, w.Section, me.s.Holder, w.Fence, stamp(me.s.Start), stamp(w.At), n.ID, n.Holder, stamp(n.Start), top, faultsAround(h.Faults, me.s.Start, w.At)))
				r.suspect(w.Section)
			case top > w.Fence:
				r.StaleRejectable++
			default:
				n := ss[by]
				r.StaleAccepted = append(r.StaleAccepted, fmt.Sprintf("%s: write of section %d (%s, fence %d, granted %s) at %s, after section %d (%s, granted %s) had written its fence %d: a fenced resource cannot reject it%s",
					w.Name, w.Section, me.s.Holder, w.Fence, stamp(me.s.Start), stamp(w.At), n.ID, n.Holder, stamp(n.Start), top, faultsAround(h.Faults, me.s.Start, w.At)))
			}
		}
		t.put(me.rank, w.Fence)
	}
}

// suffixMax answers "the largest value put at a position after i, and
// where" in O(log n).
type suffixMax struct {
	val []int64
	at  []int
}

func newSuffixMax(n int) *suffixMax {
	t := &suffixMax{val: make([]int64, n+1), at: make([]int, n+1)}
	for i := range t.at {
		t.at[i] = -1
	}
	return t
}

// put records v at position i (0-based). Positions are stored mirrored, so
// that a prefix maximum of the tree is a suffix maximum of the positions.
func (t *suffixMax) put(i int, v int64) {
	n := len(t.val) - 1
	for k := n - i; k <= n; k += k & -k {
		if t.at[k] < 0 || v > t.val[k] {
			t.val[k], t.at[k] = v, i
		}
	}
}

// after returns the largest value put at a position > i and its position,
// or -1 as position when there is none.
func (t *suffixMax) after(i int) (int64, int) {
	n := len(t.val) - 1
	var best int64
	at := -1
	for k := n - i - 1; k > 0; k -= k & -k {
		if t.at[k] >= 0 && (at < 0 || t.val[k] > best) {
			best, at = t.val[k], t.at[k]
		}
	}
	return best, at
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
			if f.Detail != "" {
				fmt.Fprintf(&b, " (%s)", f.Detail)
			}
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
	for _, k := range []Kind{KindLease, KindPermit, KindRead, KindWrite} {
		if n := r.SectionsByKind[k]; n > 0 {
			row("  of a "+k.String(), n)
		}
	}
	shared := make([]string, 0, len(r.PeakShared))
	for n := range r.PeakShared {
		shared = append(shared, n)
	}
	sort.Strings(shared)
	for _, n := range shared {
		row("  most permits or readers of "+n+" live at once (after data-losing faults too)", r.PeakShared[n])
	}
	for _, e := range []Ending{EndReleased, EndLost, EndClosed, EndUnknown} {
		if n := r.SectionsByEnd[e]; n > 0 || e != EndUnknown {
			row("  ended "+e.String(), n)
		}
	}
	row("  stalled past their lease", r.Stalled)
	row("  context cancelled after the local deadline", fmt.Sprintf("%d (at most %v late)", r.LateCancels, r.MaxLate.Round(time.Microsecond)))
	row("  server expiry - cancellation, ended lost", r.MarginSummary())
	row("    lost, expiry not observed", r.MarginUnknown)
	row("fenced writes taken by the resource (the in-memory store takes them all)", r.Writes)
	row("  refused as stale by the resource (a real one: PostgreSQL)", r.Refused)
	row("  by stalled holders", r.StalledWrites)
	row("  stale: the writer had been superseded", r.StaleWrites)
	row("    rejectable: a newer, larger fence written first", r.StaleRejectable)
	row("    unfenced: no newer holder had written yet", r.StaleUnfenced)
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
	row("VIOLATIONS: stale writes a fenced resource would accept", len(r.StaleAccepted))
	row("VIOLATIONS: stale writes the real resource took", len(r.StaleCommitted))
	lin := 0
	if r.Linearizability.Failed() {
		lin = 1
	}
	row("VIOLATIONS: not linearizable (porcupine)", lin)
	row("linearizability (porcupine)", r.Linearizability)
	for _, k := range r.Linearizability.Kinds {
		row("  of "+k.Kind+" names", k)
	}
	row("expected (data-losing fault): overlaps", len(r.ExpectedOverlap))
	row("expected (data-losing fault): outlived", len(r.ExpectedOutlive))
	row("expected (runner not scheduled): overlaps", len(r.StarvedOverlap))
	row("expected (runner not scheduled): outlived", len(r.StarvedOutlive))
	row("unknown (observer blind after the expiry it read): outlived", len(r.BlindOutlive))
	row("fence older than the Acquire call (diagnostic)", len(r.Anachronisms))
	_ = tw.Flush()
	for _, l := range []struct {
		what string
		list []string
	}{
		{"overlap", r.Overlaps}, {"fence", r.FenceBackwards}, {"outlived", r.OutlivedServer}, {"stale write", r.StaleAccepted}, {"stale write taken", r.StaleCommitted},
		{"expected overlap", r.ExpectedOverlap}, {"expected outlived", r.ExpectedOutlive},
		{"starved overlap", r.StarvedOverlap}, {"starved outlived", r.StarvedOutlive},
		{"blind outlived", r.BlindOutlive},
		{"anachronism", r.Anachronisms},
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

// MarginSummary describes the distribution of Margins.
func (r *Report) MarginSummary() string {
	if len(r.Margins) == 0 {
		return "none"
	}
	m := slices.Clone(r.Margins)
	slices.Sort(m)
	q := func(p float64) time.Duration { return m[int(p*float64(len(m)-1)+0.5)].Round(10 * time.Microsecond) }
	return fmt.Sprintf("min %v, p50 %v, p99 %v, max %v (%d)", q(0), q(0.5), q(0.99), q(1), len(m))
}
