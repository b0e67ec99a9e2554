package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func TestLinearizableFindsOverlap(t *testing.T) {
	h := cleanHistory()
	h.Sections[1].Start = ms(99) // section 2 believed it held while 1 did
	r := CheckLinearizable(h, time.Minute)
	if r.Result != porcupine.Illegal || !r.Failed() {
		t.Fatalf("porcupine on an overlap: %v", r)
	}
	rep := Check(h)
	rep.Linearizability = r
	if rep.Violations() != 2 { // the overlap, and porcupine's verdict
		t.Fatalf("violations %d", rep.Violations())
	}
	path := filepath.Join(t.TempDir(), "overlap.html")
	if err := r.Visualize(path); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(html), "acquire #2") {
		t.Fatalf("visualisation lacks the operations (%v)", err)
	}
}

func TestLinearizableFindsRepeatedFence(t *testing.T) {
	h := cleanHistory()
	h.Sections[2].Fence = 11 // section 3 repeats section 2's fence
	if r := CheckLinearizable(h, time.Minute); r.Result != porcupine.Illegal {
		t.Fatalf("porcupine on a repeated fence: %v", r)
	}
}

// A write whose fence ties with the newer holder's, after the newer holder
// took the lock, cannot be told apart from the newer holder's own.
func TestLinearizableFindsIndistinguishableWrite(t *testing.T) {
	h := cleanHistory()
	h.Writes[4].Fence = 11 // section 1's stalled write carries 2's fence
	if r := CheckLinearizable(h, time.Minute); r.Result != porcupine.Illegal {
		t.Fatalf("porcupine: %v", r)
	}
	if r := Check(h); len(r.StaleAccepted) != 1 {
		t.Fatalf("checker: %q", r.StaleAccepted)
	}
}

// Acquisitions are ordered by their fences within the freedom their
// intervals leave: a fence granted after a larger one ended is illegal,
// one whose call began before the larger one's is not.
func TestLinearizableOrdersConcurrentAcquisitions(t *testing.T) {
	h := History{Sections: []Section{
		{ID: 1, Name: "a", Holder: "x", Fence: 20, Called: ms(0), Start: ms(10), End: ms(10), Ended: EndReleased},
		{ID: 2, Name: "a", Holder: "y", Fence: 10, Called: ms(0), Start: ms(11), End: ms(11), Ended: EndReleased},
	}}
	if r := CheckLinearizable(h, time.Minute); r.Result != porcupine.Illegal {
		t.Fatalf("fence 10 granted after 20 ended: %v", r)
	}
	// Section 2's fence 10 was granted first, its return came late.
	h.Sections[1].Start, h.Sections[1].End = ms(11), ms(12)
	h.Sections[0].Called = ms(5)
	h.Sections[1].Called = ms(0)
	h.Sections[0].Start, h.Sections[0].End = ms(13), ms(14)
	if r := CheckLinearizable(h, time.Minute); r.Result != porcupine.Ok {
		t.Fatalf("in fence order: %v", r)
	}
}

func TestLinearizableEmpty(t *testing.T) {
	if r := CheckLinearizable(History{}, time.Minute); r.Failed() || r.String() != "not checked" {
		t.Fatalf("%v", r)
	}
}

// seq is n sections of name one after another (each ends before the next
// is asked for), with fences 1000, 1001, ...: a history that cutting cuts
// at every section.
func seq(name string, kind Kind, n int) []Section {
	var ss []Section
	for i := range n {
		ss = append(ss, Section{ID: i + 1, Name: name, Kind: kind, Limit: 2, Holder: fmt.Sprint("h", i%3), Fence: int64(1000 + i),
			Called: ms(10 * i), Start: ms(10*i + 1), End: ms(10*i + 5), Ended: EndReleased})
	}
	return ss
}

// Cutting is sound: a long history is checked in many parts, and one
// illegal step in its middle is still found; so is a fence that goes
// back below one granted many parts earlier (the cut carries the largest
// fence into the next part).
func TestCutKeepsIllegalSteps(t *testing.T) {
	h := History{Sections: seq("a", KindLease, 300)}
	r := CheckLinearizable(h, time.Minute)
	if r.Result != porcupine.Ok || r.Partitions < 250 {
		t.Fatalf("a clean history: %v (want it cut into about 300 parts)", r)
	}
	overlap := History{Sections: seq("a", KindLease, 300)}
	overlap.Sections[149].End = ms(10*150 + 2) // 150 still believes when 151 starts
	if r := CheckLinearizable(overlap, time.Minute); r.Result != porcupine.Illegal {
		t.Fatalf("an overlap in the middle: %v", r)
	}
	back := History{Sections: seq("a", KindLease, 300)}
	back.Sections[200].Fence = 1010 // below fences granted 190 parts before
	if r := CheckLinearizable(back, time.Minute); r.Result != porcupine.Illegal {
		t.Fatalf("a fence back across cuts: %v", r)
	}
	// A stalled write long after its section, in another part, with a
	// fence older than the newest: legal (a fenced resource rejects it);
	// with the newest fence but from an older holder: illegal.
	stale := History{Sections: seq("a", KindLease, 300), Writes: []Write{{Seq: 1, Section: 10, Name: "a", Fence: 1009, At: ms(2000)}}}
	if r := CheckLinearizable(stale, time.Minute); r.Result != porcupine.Ok {
		t.Fatalf("a stale write with an old fence: %v", r)
	}
	stale.Writes[0].Fence = 1299
	if r := CheckLinearizable(stale, time.Minute); r.Result != porcupine.Illegal {
		t.Fatalf("a write with the newest fence from an older holder: %v", r)
	}
}

// The semaphore model: at most n permits believed at once, a hold of k
// counting k; fences increase across permits.
func TestPermitModel(t *testing.T) {
	h := History{Sections: []Section{
		{ID: 1, Name: "s", Kind: KindPermit, Limit: 2, Holder: "x", Fence: 10, Called: ms(0), Start: ms(1), End: ms(10), Ended: EndReleased},
		{ID: 2, Name: "s", Kind: KindPermit, Limit: 2, Holder: "y", Fence: 11, Called: ms(2), Start: ms(3), End: ms(12), Ended: EndReleased},
		{ID: 3, Name: "s", Kind: KindPermit, Limit: 2, Holder: "z", Fence: 12, Called: ms(11), Start: ms(11), End: ms(20), Ended: EndReleased},
	}}
	if r := CheckLinearizable(h, time.Minute); r.Result != porcupine.Ok || len(r.Kinds) != 1 || r.Kinds[0].Kind != "permit" {
		t.Fatalf("two permits of 2, then a third after one ended: %v %v", r, r.Kinds)
	}
	h.Sections[2].Called, h.Sections[2].Start = ms(4), ms(5) // a third while two live
	if r := CheckLinearizable(h, time.Minute); r.Result != porcupine.Illegal {
		t.Fatalf("three permits of 2 at once: %v", r)
	}
	h.Sections[2].Called, h.Sections[2].Start = ms(11), ms(11)
	h.Sections[1].Count = 2 // y held 2 of 2 beside x's
	if r := CheckLinearizable(h, time.Minute); r.Result != porcupine.Illegal {
		t.Fatalf("a hold of 2 beside another permit of 2: %v", r)
	}
	h.Sections[1].Count = 0
	h.Sections[1].Fence = 9 // granted after 10, with a smaller fence
	if r := CheckLinearizable(h, time.Minute); r.Result != porcupine.Illegal {
		t.Fatalf("a permit's fence below an earlier one's: %v", r)
	}
}

// The read-write lock model: readers together, a writer alone.
func TestReadWriteModel(t *testing.T) {
	h := History{Sections: []Section{
		{ID: 1, Name: "rw", Kind: KindRead, Holder: "x", Fence: 10, Called: ms(0), Start: ms(1), End: ms(10), Ended: EndReleased},
		{ID: 2, Name: "rw", Kind: KindRead, Holder: "y", Fence: 11, Called: ms(2), Start: ms(3), End: ms(12), Ended: EndReleased},
		{ID: 3, Name: "rw", Kind: KindWrite, Holder: "z", Fence: 12, Called: ms(4), Start: ms(13), End: ms(20), Ended: EndReleased},
	}, Writes: []Write{{Seq: 1, Section: 3, Name: "rw", Fence: 12, At: ms(14)}}}
	if r := CheckLinearizable(h, time.Minute); r.Result != porcupine.Ok || r.Kinds[0].Kind != "rw" {
		t.Fatalf("two readers, then a writer: %v %v", r, r.Kinds)
	}
	h.Sections[2].Start = ms(11) // the writer while y reads
	if r := CheckLinearizable(h, time.Minute); r.Result != porcupine.Illegal {
		t.Fatalf("a writer beside a reader: %v", r)
	}
}

// Every kind gets its own verdict.
func TestLinearizableByKind(t *testing.T) {
	h := History{Sections: append(append(seq("a", KindLease, 3), seq("s", KindPermit, 3)...), seq("rw", KindRead, 3)...)}
	for i := range h.Sections {
		h.Sections[i].ID = i + 1
	}
	r := CheckLinearizable(h, time.Minute)
	var kinds []string
	for _, k := range r.Kinds {
		kinds = append(kinds, k.Kind+":"+k.String())
	}
	if r.Result != porcupine.Ok || len(r.Kinds) != 3 {
		t.Fatalf("%v: %q", r, kinds)
	}
}
