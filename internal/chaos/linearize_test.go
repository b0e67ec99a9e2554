package chaos

import (
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
