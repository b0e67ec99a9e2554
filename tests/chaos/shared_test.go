package chaos

import (
	"strings"
	"testing"
)

func permit(id int, name string, n int, fence int64, start, end int) Section {
	s := sec(id, name, fence, start, end, EndReleased)
	s.Kind, s.Limit = KindPermit, n
	return s
}

func rw(id int, kind Kind, fence int64, start, end int) Section {
	s := sec(id, "doc", fence, start, end, EndReleased)
	s.Kind = kind
	return s
}

// Two permits of n=2 overlap freely; a third live at once is a violation,
// unless n is 3.
func TestCheckPermits(t *testing.T) {
	two := []Section{
		permit(1, "s", 2, 10, 0, 100),
		permit(2, "s", 2, 11, 10, 200),
		permit(3, "s", 2, 12, 100, 300), // begins as 1 ends
	}
	if r := Check(History{Sections: two}); r.Violations() != 0 {
		t.Fatalf("two permits of 2: %v %v", r.Overlaps, r.FenceBackwards)
	}
	three := append(two, permit(4, "s", 2, 13, 150, 250)) // 2, 3 and 4 live at 150
	r := Check(History{Sections: three})
	if len(r.Overlaps) != 1 || !strings.Contains(r.Overlaps[0], "2 permits of its 2") {
		t.Fatalf("three permits of 2: %q", r.Overlaps)
	}
	for i := range three {
		three[i].Limit = 3
	}
	if r := Check(History{Sections: three}); r.Violations() != 0 {
		t.Fatalf("three permits of 3: %v", r.Overlaps)
	}
}

// Readers share, a writer is alone.
func TestCheckReadWrite(t *testing.T) {
	ok := []Section{
		rw(1, KindRead, 10, 0, 100),
		rw(2, KindRead, 11, 50, 150),
		rw(3, KindWrite, 12, 150, 200),
		rw(4, KindRead, 13, 200, 250),
	}
	if r := Check(History{Sections: ok}); r.Violations() != 0 {
		t.Fatalf("%v %v", r.Overlaps, r.FenceBackwards)
	}
	bad := append(ok, rw(5, KindRead, 14, 180, 190)) // a reader beside the writer
	if r := Check(History{Sections: bad}); len(r.Overlaps) != 1 || !strings.Contains(r.Overlaps[0], "write lock") {
		t.Fatalf("a reader beside a writer: %q", r.Overlaps)
	}
	bad = append(ok, rw(5, KindWrite, 14, 60, 90)) // a writer beside two readers
	if r := Check(History{Sections: bad}); len(r.Overlaps) != 2 {
		t.Fatalf("a writer beside two readers: %q", r.Overlaps)
	}
}

// Overlapping holders may start in another order than they were granted;
// a fence twice, or one below a section that had ended before the Acquire
// was called, is a violation.
func TestCheckSharedFences(t *testing.T) {
	ok := []Section{
		permit(1, "s", 5, 20, 0, 100),
		permit(2, "s", 5, 10, 5, 100), // granted first, returned later
		permit(3, "s", 5, 30, 150, 200),
	}
	ok[2].Called = ms(120)
	if r := Check(History{Sections: ok}); len(r.FenceBackwards) != 0 {
		t.Fatalf("%q", r.FenceBackwards)
	}
	twice := append(ok, permit(4, "s", 5, 20, 160, 170))
	if r := Check(History{Sections: twice}); len(r.FenceBackwards) != 1 || !strings.Contains(r.FenceBackwards[0], "both got fence 20") {
		t.Fatalf("a fence twice: %q", r.FenceBackwards)
	}
	late := append(ok, permit(4, "s", 5, 15, 160, 170)) // called at 160, after 1 (fence 20) ended
	if r := Check(History{Sections: late}); len(r.FenceBackwards) != 1 || !strings.Contains(r.FenceBackwards[0], "not above fence 20") {
		t.Fatalf("a fence below an ended section's: %q", r.FenceBackwards)
	}
}

// With a real resource (Guarded), a write it took after a newer holder had
// written a larger fence is a violation; the writes it refused are only
// counted.
func TestCheckGuardedWrites(t *testing.T) {
	h := History{
		Guarded: true,
		Sections: []Section{
			sec(1, "a", 10, 0, 100, EndLost),
			sec(2, "a", 11, 100, 200, EndReleased),
		},
		Writes: []Write{
			{Seq: 1, Section: 1, Name: "a", Fence: 10, At: ms(10)},
			{Seq: 2, Section: 2, Name: "a", Fence: 11, At: ms(110)},
			{Section: 1, Name: "a", Fence: 10, At: ms(120), Stalled: true, Refused: true},
		},
	}
	r := Check(h)
	if r.Violations() != 0 || r.Refused != 1 || r.Writes != 2 {
		t.Fatalf("a refused stale write: %d violations, %d refused, %d writes", r.Violations(), r.Refused, r.Writes)
	}
	h.Writes[2].Refused, h.Writes[2].Seq = false, 3 // the resource took it
	r = Check(h)
	if len(r.StaleCommitted) != 1 || r.Violations() != 1 {
		t.Fatalf("a stale write taken: %q", r.StaleCommitted)
	}
	h.Guarded = false // the in-memory store takes every write: a correct resource would refuse it
	if r := Check(h); r.Violations() != 0 || r.StaleRejectable != 1 {
		t.Fatalf("unguarded: %d violations, %d rejectable", r.Violations(), r.StaleRejectable)
	}
}
