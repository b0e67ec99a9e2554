package chaos

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/tenure-go/tenure/tests/redistest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := redistest.Leaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

func sec(id int, name string, fence int64, start, end int, how Ending) Section {
	return Section{ID: id, Name: name, Holder: "h" + string(rune('0'+id%10)), Token: "tok" + string(rune('a'+id)), Fence: fence, Start: ms(start), End: ms(end), Ended: how}
}

// A clean history: one name handed from holder to holder, another name in
// parallel, writes in order, faults that lost nothing.
func cleanHistory() History {
	return History{
		Sections: []Section{
			sec(1, "a", 10, 0, 100, EndReleased),
			sec(2, "a", 11, 100, 250, EndLost), // begins exactly when 1 ended
			sec(3, "a", 12, 300, 400, EndReleased),
			sec(4, "b", 5, 50, 350, EndReleased),                                               // another name, in parallel
			{ID: 5, Name: "a", Holder: "do", Start: ms(400), End: ms(450), Ended: EndReleased}, // Do: no fence
		},
		Writes: []Write{
			{Seq: 1, Section: 1, Name: "a", Fence: 10, At: ms(10)},
			{Seq: 2, Section: 1, Name: "a", Fence: 10, At: ms(90)}, // the same holder again
			{Seq: 3, Section: 4, Name: "b", Fence: 5, At: ms(95)},
			{Seq: 4, Section: 2, Name: "a", Fence: 11, At: ms(110)},
			// Stale (2 was granted at 100), after 2 wrote its larger fence:
			// a fenced resource rejects it.
			{Seq: 5, Section: 1, Name: "a", Fence: 10, At: ms(120), Stalled: true},
			{Seq: 6, Section: 3, Name: "a", Fence: 12, At: ms(310)},
		},
		Faults: []Fault{{Kind: "pause", Start: ms(120), End: ms(200)}},
		Sightings: []Sighting{
			// Section 2, lost at 250, 5ms before its key's TTL ran out.
			{Name: "a", Token: "tokc", LastSeen: ms(240), GoneBy: ms(260), ExpiresAt: ms(255)},
		},
	}
}

// refence gives section id fence f, in its section and in its writes.
func refence(h History, id int, f int64) {
	for i := range h.Sections {
		if h.Sections[i].ID == id {
			h.Sections[i].Fence = f
		}
	}
	for i := range h.Writes {
		if h.Writes[i].Section == id {
			h.Writes[i].Fence = f
		}
	}
}

func TestCheckCleanHistoryPasses(t *testing.T) {
	r := Check(cleanHistory())
	if r.Violations() != 0 || len(r.ExpectedOverlap)+len(r.ExpectedOutlive) != 0 {
		var b bytes.Buffer
		r.Print(&b, nil)
		t.Fatalf("violations in a clean history:\n%s", b.String())
	}
	if r.Sections != 5 || r.Writes != 6 || r.StalledWrites != 1 || r.StaleWrites != 1 || r.StaleRejectable != 1 || r.StaleUnfenced != 0 || r.FaultsByKind["pause"] != 1 {
		t.Fatalf("counts: %+v", r)
	}
	if len(r.Margins) != 1 || r.Margins[0] != 5*time.Millisecond || r.MarginUnknown != 0 {
		t.Fatalf("margins %v, unknown %d", r.Margins, r.MarginUnknown)
	}
	if lr := CheckLinearizable(cleanHistory(), time.Minute); lr.Result != porcupine.Ok {
		t.Fatalf("porcupine on a clean history: %v", lr)
	}
}

func TestCheckFindsOverlap(t *testing.T) {
	h := cleanHistory()
	h.Sections[1].Start = ms(99) // section 2 began 1ms before 1 ended
	r := Check(h)
	if len(r.Overlaps) != 1 || r.Violations() != 1 {
		t.Fatalf("overlaps %q, violations %d", r.Overlaps, r.Violations())
	}
	if !strings.Contains(r.Overlaps[0], "section 2") || !strings.Contains(r.Overlaps[0], "section 1") {
		t.Fatalf("overlap names the wrong sections: %s", r.Overlaps[0])
	}
}

// A long section that began well before the one it overlaps is still seen.
func TestCheckFindsOverlapWithLongSection(t *testing.T) {
	h := cleanHistory()
	h.Sections[0].End = ms(320) // section 1 live across 2 and into 3
	r := Check(h)
	if len(r.Overlaps) != 2 {
		t.Fatalf("overlaps %q", r.Overlaps)
	}
}

func TestCheckFindsOverlapOfFencelessDo(t *testing.T) {
	h := cleanHistory()
	h.Sections[4].Start = ms(390)
	if r := Check(h); len(r.Overlaps) != 1 {
		t.Fatalf("overlaps %q", r.Overlaps)
	}
}

func TestCheckFindsBackwardFence(t *testing.T) {
	h := cleanHistory()
	h.Sections[2].Fence = 9 // after 10 and 11
	r := Check(h)
	if len(r.FenceBackwards) != 1 || r.Violations() != 1 {
		t.Fatalf("fence violations %q", r.FenceBackwards)
	}
	h = cleanHistory()
	h.Sections[1].Fence = 10 // repeated
	if r := Check(h); len(r.FenceBackwards) != 1 {
		t.Fatalf("a repeated fence passed: %q", r.FenceBackwards)
	}
}

// A superseded holder's write after the newer holder wrote is a violation
// when the newer fence does not exceed it: the store took it, and so would
// any resource that checks fences.
func TestCheckFindsStaleAcceptedWrite(t *testing.T) {
	h := cleanHistory()
	refence(h, 2, 10) // section 2 repeats section 1's fence
	r := Check(h)
	if len(r.StaleAccepted) != 1 || len(r.FenceBackwards) != 1 || r.Violations() != 2 {
		t.Fatalf("stale writes %q, fences %q", r.StaleAccepted, r.FenceBackwards)
	}
	if !strings.Contains(r.StaleAccepted[0], "section 1") || !strings.Contains(r.StaleAccepted[0], "after section 2") {
		t.Fatalf("wrong sections: %s", r.StaleAccepted[0])
	}
	// A fence below the superseded one's, too.
	refence(h, 2, 9)
	if r := Check(h); len(r.StaleAccepted) != 1 {
		t.Fatalf("stale write over fence 9: %q", r.StaleAccepted)
	}
	// The order that counts is the store's, not the slice's.
	h = cleanHistory()
	refence(h, 2, 10)
	h.Writes[0], h.Writes[4] = h.Writes[4], h.Writes[0]
	if r := Check(h); len(r.StaleAccepted) != 1 {
		t.Fatalf("stale writes after shuffling %q", r.StaleAccepted)
	}
}

// A stale write before any newer holder wrote is one no fenced resource can
// reject: counted, not a violation, whatever the fences.
func TestCheckStaleWriteBeforeNewerWriteIsUnfenced(t *testing.T) {
	h := cleanHistory()
	h.Writes[4].At = ms(105) // after 2 was granted (100), before it wrote (110)
	h.Writes[4].Seq, h.Writes[3].Seq = 4, 5
	r := Check(h)
	if r.Violations() != 0 || r.StaleWrites != 1 || r.StaleUnfenced != 1 || r.StaleRejectable != 0 {
		t.Fatalf("violations %d, stale %d, unfenced %d, rejectable %d", r.Violations(), r.StaleWrites, r.StaleUnfenced, r.StaleRejectable)
	}
	refence(h, 2, 10)
	if r := Check(h); len(r.StaleAccepted) != 0 || r.StaleUnfenced != 1 {
		t.Fatalf("an unfenced stale write judged by a fence written after it: %q", r.StaleAccepted)
	}
	// Not superseded: 1's write after its own end, before anyone else
	// was granted, is not stale.
	h = cleanHistory()
	h.Sections[1].Start = ms(130)
	if r := Check(h); r.StaleWrites != 0 {
		t.Fatalf("stale %d", r.StaleWrites)
	}
}

func TestCheckFindsContextOutlivingServer(t *testing.T) {
	h := cleanHistory()
	h.Sightings[0].GoneBy = ms(249) // gone while section 2 was live
	r := Check(h)
	if len(r.OutlivedServer) != 1 || r.Violations() != 1 {
		t.Fatalf("outlived %q", r.OutlivedServer)
	}
	// The key's TTL ran out at 249 (PEXPIRETIME) while section 2 was live
	// until 250: a violation although the observer saw the key gone only
	// at 260, and a negative margin.
	h = cleanHistory()
	h.Sightings[0].ExpiresAt = ms(249)
	r = Check(h)
	if len(r.OutlivedServer) != 1 || r.Violations() != 1 || !strings.Contains(r.OutlivedServer[0], "TTL ran out") {
		t.Fatalf("outlived %q", r.OutlivedServer)
	}
	if len(r.Margins) != 1 || r.Margins[0] != -time.Millisecond {
		t.Fatalf("margins %v", r.Margins)
	}
	h = cleanHistory()
	h.Sections[2].UnnoticedLoss = true
	if r := Check(h); len(r.OutlivedServer) != 1 {
		t.Fatalf("unnoticed loss passed: %q", r.OutlivedServer)
	}
}

// After a restart that lost the data, overlaps and early expiries are
// expected and counted apart; a stale write accepted still fails.
func TestCheckDataLossMakesOverlapExpected(t *testing.T) {
	h := cleanHistory()
	h.Sections[1].Start = ms(60) // overlaps section 1 (0..100)
	h.Faults = append(h.Faults, Fault{Kind: "restart-lossy", Start: ms(40), End: ms(50), LosesData: true})
	r := Check(h)
	if r.Violations() != 0 || len(r.ExpectedOverlap) != 1 {
		t.Fatalf("violations %d, expected overlaps %q", r.Violations(), r.ExpectedOverlap)
	}
	// A loss that came after the second holder began explains nothing.
	h.Faults[1].Start, h.Faults[1].End = ms(70), ms(80)
	if r := Check(h); len(r.Overlaps) != 1 {
		t.Fatalf("overlap excused by a later restart: %q", r.Overlaps)
	}
	// Nor does one that ended before the first holder got its lease: the
	// server that granted it kept its data.
	h.Faults[1].Start, h.Faults[1].End = ms(-20), ms(-10)
	if r := Check(h); len(r.Overlaps) != 1 {
		t.Fatalf("overlap excused by an earlier restart: %q", r.Overlaps)
	}
	h.Faults[1].Start, h.Faults[1].End = ms(40), ms(50)
	if lr := CheckLinearizable(h, time.Minute); lr.Result != porcupine.Ok {
		t.Fatalf("porcupine: an overlap across a data-losing fault: %v", lr)
	}
}

func TestCheckDataLossMakesEarlyExpiryExpected(t *testing.T) {
	h := cleanHistory() // section 2: 100..250
	h.Sightings[0].GoneBy = ms(215)
	h.Faults = append(h.Faults, Fault{Kind: "restart-lossy", Start: ms(200), End: ms(210), LosesData: true})
	r := Check(h)
	if r.Violations() != 0 || len(r.ExpectedOutlive) != 1 {
		t.Fatalf("violations %d, expected %q", r.Violations(), r.ExpectedOutlive)
	}
	if len(r.Margins) != 0 {
		t.Fatalf("a margin from a data-losing fault's window: %v", r.Margins)
	}
	h.Faults[1].LosesData = false // a restart that kept its data explains nothing
	if r := Check(h); len(r.OutlivedServer) != 1 {
		t.Fatalf("outlived %q", r.OutlivedServer)
	}
	h = cleanHistory()
	h.Sections[1].UnnoticedLoss = true
	h.Faults = append(h.Faults, Fault{Kind: "restart-lossy", Start: ms(200), End: ms(210), LosesData: true})
	if r := Check(h); r.Violations() != 0 || len(r.ExpectedOutlive) != 1 {
		t.Fatalf("unnoticed loss after a data-losing restart: %d violations", r.Violations())
	}
}

// S5 holds whatever data the server comes back with.
func TestCheckStaleWriteAndFenceFailEvenAfterDataLoss(t *testing.T) {
	h := cleanHistory()
	h.Faults = append(h.Faults, Fault{Kind: "restart from an older snapshot", Start: ms(40), End: ms(50), LosesData: true})
	refence(h, 2, 10)
	if r := Check(h); len(r.StaleAccepted) != 1 || len(r.FenceBackwards) != 1 {
		t.Fatalf("after a data-losing fault: stale writes %q, fences %q", r.StaleAccepted, r.FenceBackwards)
	}
	if lr := CheckLinearizable(h, time.Minute); lr.Result != porcupine.Illegal {
		t.Fatalf("porcupine: a repeated fence across a data-losing fault: %v", lr)
	}
}

func TestCheckCountsLateCancels(t *testing.T) {
	h := cleanHistory()
	h.Sections[1].Deadline = ms(240) // section 2 ended at 250
	h.Sections[2].Deadline = ms(500)
	r := Check(h)
	if r.LateCancels != 1 || r.MaxLate != 10*time.Millisecond || r.Violations() != 0 {
		t.Fatalf("late %d by %v, violations %d", r.LateCancels, r.MaxLate, r.Violations())
	}
}

func TestReportPrints(t *testing.T) {
	h := cleanHistory()
	h.Sections[1].Start = ms(99)
	var stats Stats
	stats.Add("acquire attempts", "%d", 42)
	var b bytes.Buffer
	Check(h).Print(&b, &stats)
	out := b.String()
	for _, want := range []string{"acquire attempts", "42", "VIOLATIONS: overlapping live holders", "overlap: a:", "pause"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// The store takes every write, in one order, however many goroutines
// write at once.
func TestStore(t *testing.T) {
	s := NewStore()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				s.Write(g, "c", int64(i), i%2 == 0)
			}
		})
	}
	wg.Wait()
	ws := s.Writes()
	if len(ws) != 1600 {
		t.Fatalf("%d writes recorded, want 1600", len(ws))
	}
	for i, w := range ws {
		if w.Seq != int64(i+1) || (i > 0 && w.At.Before(ws[i-1].At)) {
			t.Fatalf("write %d: seq %d at %v after %v", i, w.Seq, w.At, ws[max(i-1, 0)].At)
		}
	}
}

func TestMarginSummary(t *testing.T) {
	r := &Report{Margins: []time.Duration{3 * time.Millisecond, -time.Millisecond, 10 * time.Millisecond}}
	if got, want := r.MarginSummary(), "min -1ms, p50 3ms, p99 10ms, max 10ms (3)"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

func TestSuffixMax(t *testing.T) {
	m := newSuffixMax(6)
	if _, at := m.after(0); at != -1 {
		t.Fatalf("empty: %d", at)
	}
	m.put(1, 7)
	m.put(4, 3)
	m.put(5, 9)
	for _, c := range []struct {
		i      int
		v      int64
		at     int
		nobody bool
	}{{0, 9, 5, false}, {1, 9, 5, false}, {4, 9, 5, false}, {5, 0, -1, true}} {
		v, at := m.after(c.i)
		if at != c.at || (!c.nobody && v != c.v) {
			t.Errorf("after(%d) = %d at %d, want %d at %d", c.i, v, at, c.v, c.at)
		}
	}
	m.put(5, 1)
	m.put(3, 8)
	if v, at := m.after(2); v != 9 || at != 5 {
		t.Fatalf("a smaller value replaced a larger one: %d at %d", v, at)
	}
	if v, at := m.after(4); v != 9 || at != 5 {
		t.Fatalf("%d at %d", v, at)
	}
}

// A context cancelled late while the runner itself was not scheduled (its
// heartbeat late by more than the slack) is outside S1's premise: it is
// counted apart, not as a violation. The same lateness with no such window
// is a violation, and a window elsewhere in time excuses nothing.
func TestCheckStarvedRunnerExcusesOnlyWhatFallsInIt(t *testing.T) {
	starved := func(h History, from, to int) History {
		h.Faults = append(h.Faults, Fault{Kind: "runner not scheduled", Start: ms(from), End: ms(to), Starved: true})
		return h
	}
	h := cleanHistory()
	h.Sightings[0].ExpiresAt = ms(240) // section 2 ends at 250: 10ms late
	if r := Check(h); len(r.OutlivedServer) != 1 {
		t.Fatalf("without a starvation window: outlived %q", r.OutlivedServer)
	}
	h = starved(cleanHistory(), 235, 251)
	h.Sightings[0].ExpiresAt = ms(240)
	r := Check(h)
	if len(r.OutlivedServer) != 0 || len(r.StarvedOutlive) != 1 || r.Violations() != 0 {
		t.Fatalf("late inside a starvation window: outlived %q, starved %q", r.OutlivedServer, r.StarvedOutlive)
	}
	if len(r.Margins) != 0 {
		t.Fatalf("an excused section's margin was counted: %v", r.Margins)
	}
	h = starved(cleanHistory(), 10, 30)
	h.Sightings[0].ExpiresAt = ms(240)
	if r := Check(h); len(r.OutlivedServer) != 1 || len(r.StarvedOutlive) != 0 {
		t.Fatalf("a starvation window elsewhere excused it: outlived %q, starved %q", r.OutlivedServer, r.StarvedOutlive)
	}

	// An overlap: section 3 begins while section 2 is still live.
	h = cleanHistory()
	h.Sections[1].End = ms(320)
	if r := Check(h); len(r.Overlaps) != 1 {
		t.Fatalf("overlap not found: %q", r.Overlaps)
	}
	h = starved(cleanHistory(), 290, 330)
	h.Sections[1].End = ms(320)
	if r := Check(h); len(r.Overlaps) != 0 || len(r.StarvedOverlap) != 1 {
		t.Fatalf("overlap inside a starvation window: overlaps %q, starved %q", r.Overlaps, r.StarvedOverlap)
	}
}

// A fence (at least the server's clock when it granted the name) older than
// the holder's call to Acquire is reported as an anachronism, and nothing
// else is.
func TestCheckReportsFencesOlderThanTheirCall(t *testing.T) {
	base := time.Date(2026, 11, 23, 2, 20, 47, 0, time.UTC)
	h := History{Sections: []Section{
		{ID: 1, Name: "a", Holder: "h1", Fence: base.UnixMicro(), Called: base.Add(-time.Millisecond), Start: base.Add(time.Millisecond), End: base.Add(10 * time.Millisecond), Ended: EndReleased},
		{ID: 2, Name: "a", Holder: "h2", Fence: base.Add(20 * time.Millisecond).UnixMicro(), Called: base.Add(790 * time.Millisecond), Start: base.Add(800 * time.Millisecond), End: base.Add(900 * time.Millisecond), Ended: EndReleased},
	}}
	r := Check(h)
	if len(r.Anachronisms) != 1 || !strings.Contains(r.Anachronisms[0], "section 2") {
		t.Fatalf("anachronisms %q, want section 2's alone", r.Anachronisms)
	}
	if r.Violations() != 0 {
		t.Fatalf("an anachronism counted as a violation: %d", r.Violations())
	}
}

// An expiry read before a gap in the observer's polls may have been renewed
// unseen: a section that ended after it but before the observer looked again
// is unknown, not a violation; one that ended after that look is one.
func TestCheckObserverGap(t *testing.T) {
	h := cleanHistory()
	// Section 2 (lost at 250): the observer read expiry 200 at 150, then
	// looked again only at 300 and found the key gone.
	h.Sightings[0] = Sighting{Name: "a", Token: "tokc", LastSeen: ms(150), ExpiresAt: ms(200), GoneBy: ms(300)}
	r := Check(h)
	if r.Violations() != 0 || len(r.BlindOutlive) != 1 || !strings.Contains(r.BlindOutlive[0], "section 2") {
		t.Fatalf("violations %d, blind %q", r.Violations(), r.BlindOutlive)
	}
	// The same gap, but the section outlived the observer's next look too.
	h.Sections[1].End = ms(320)
	h.Sections[2].Start = ms(330)
	r = Check(h)
	if len(r.OutlivedServer) != 1 || len(r.BlindOutlive) != 0 {
		t.Fatalf("outlived %q, blind %q", r.OutlivedServer, r.BlindOutlive)
	}
	// No gap: the expiry read is the server's, and 250 > 200 is a violation.
	h = cleanHistory()
	h.Sightings[0] = Sighting{Name: "a", Token: "tokc", LastSeen: ms(195), ExpiresAt: ms(200), GoneBy: ms(205)}
	if r := Check(h); len(r.OutlivedServer) != 1 {
		t.Fatalf("outlived %q", r.OutlivedServer)
	}
}

// A token seen gone and back (a retried acquire that a promoted replica
// granted again) is judged by the appearance its section held; one absent
// from the server when its section began is a violation.
func TestCheckTokenSeenTwice(t *testing.T) {
	h := cleanHistory()
	// Section 2 (100..250, lost): its token was seen at 60..80 and gone at
	// 90 (the first grant, lost with a failover), then back from 99 until
	// 240, with expiry 255.
	h.Sightings = []Sighting{
		{Name: "a", Token: "tokc", FirstSeen: ms(60), LastSeen: ms(80), GoneBy: ms(90), ExpiresAt: ms(1060)},
		{Name: "a", Token: "tokc", FirstSeen: ms(99), LastSeen: ms(240), GoneBy: ms(260), ExpiresAt: ms(255)},
	}
	r := Check(h)
	if r.Violations() != 0 || len(r.Margins) != 1 || r.Margins[0] != 5*time.Millisecond {
		var b strings.Builder
		r.Print(&b, nil)
		t.Fatalf("violations in a history with a token seen twice:\n%s", b.String())
	}
	// Back only at 200: the server did not have it from 90 until then,
	// while section 2 was live from 100.
	h.Sightings[1].FirstSeen = ms(200)
	if r := Check(h); len(r.OutlivedServer) != 1 {
		t.Fatalf("outlived %q, want the section live while its token was gone", r.OutlivedServer)
	}
}
