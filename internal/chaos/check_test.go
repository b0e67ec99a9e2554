package chaos

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/redistest"
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
			{Seq: 1, Section: 1, Name: "a", Fence: 10, Accepted: true},
			{Seq: 2, Section: 1, Name: "a", Fence: 10, Accepted: true}, // the same holder again
			{Seq: 3, Section: 4, Name: "b", Fence: 5, Accepted: true},
			{Seq: 4, Section: 2, Name: "a", Fence: 11, Accepted: true},
			{Seq: 5, Section: 1, Name: "a", Fence: 10, Accepted: false, Stale: true},
			{Seq: 6, Section: 3, Name: "a", Fence: 12, Accepted: true},
		},
		Faults: []Fault{{Kind: "pause", Start: ms(120), End: ms(200)}},
		Sightings: []Sighting{
			{Name: "a", Token: "tokc", LastSeen: ms(240), GoneBy: ms(260)}, // section 2 ended at 250
		},
	}
}

func TestCheckCleanHistoryPasses(t *testing.T) {
	r := Check(cleanHistory())
	if r.Violations() != 0 || len(r.ExpectedOverlap)+len(r.ExpectedOutlive) != 0 {
		var b bytes.Buffer
		r.Print(&b, nil)
		t.Fatalf("violations in a clean history:\n%s", b.String())
	}
	if r.Sections != 5 || r.WritesAccepted != 5 || r.WritesRejected != 1 || r.StaleRejected != 1 || r.FaultsByKind["pause"] != 1 {
		t.Fatalf("counts: %+v", r)
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

func TestCheckFindsStaleAcceptedWrite(t *testing.T) {
	h := cleanHistory()
	h.Writes[4].Accepted = true // fence 10 accepted after fence 11
	r := Check(h)
	if len(r.StaleAccepted) != 1 || r.Violations() != 1 {
		t.Fatalf("stale writes %q", r.StaleAccepted)
	}
	// The order that counts is the resource's, not the slice's.
	h.Writes[0], h.Writes[5] = h.Writes[5], h.Writes[0]
	if r := Check(h); len(r.StaleAccepted) != 1 {
		t.Fatalf("stale writes after shuffling %q", r.StaleAccepted)
	}
}

func TestCheckFindsContextOutlivingServer(t *testing.T) {
	h := cleanHistory()
	h.Sightings[0].GoneBy = ms(249) // gone while section 2 was live
	r := Check(h)
	if len(r.OutlivedServer) != 1 || r.Violations() != 1 {
		t.Fatalf("outlived %q", r.OutlivedServer)
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
	h.Writes[4].Accepted = true
	if r := Check(h); len(r.StaleAccepted) != 1 {
		t.Fatalf("a stale write accepted after a data-losing restart passed: %q", r.StaleAccepted)
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

func TestCheckStaleWriteFailsEvenAfterDataLoss(t *testing.T) {
	h := cleanHistory()
	h.Faults = append(h.Faults, Fault{Kind: "restart-lossy", Start: ms(40), End: ms(50), LosesData: true})
	h.Writes[4].Accepted = true
	if r := Check(h); len(r.StaleAccepted) != 1 {
		t.Fatalf("a stale write accepted after a data-losing restart passed: %q", r.StaleAccepted)
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

// The store accepts fences at least as high as the highest it accepted,
// and only those, however many goroutines write at once.
func TestStore(t *testing.T) {
	s := NewStore()
	if !s.Write(1, "a", 5, false) || !s.Write(1, "a", 5, false) || s.Write(2, "a", 4, true) || !s.Write(3, "b", 1, false) || !s.Write(4, "a", 6, false) {
		t.Fatal("store decided wrongly")
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				s.Write(g, "c", int64(i*8+g), false)
			}
		})
	}
	wg.Wait()
	r := Check(History{Writes: s.Writes()})
	if r.Violations() != 0 || r.WritesAccepted == 0 || r.WritesRejected == 0 {
		t.Fatalf("store under contention: %d violations, %d accepted, %d rejected", r.Violations(), r.WritesAccepted, r.WritesRejected)
	}
}
