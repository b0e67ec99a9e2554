// Package chaos checks tenure's promise — never two holders, and you always
// know when you lost — against the recorded history of a run under faults.
//
// A run (chaos_test.go, behind the build tag "chaos") records every critical
// section, every write to a fenced resource, every fault it injected and
// what an observer saw on the server; Check then looks for:
//
//   - overlaps: two holders of one name whose lease contexts were live at
//     the same instant (S1);
//   - fences that did not strictly increase from one acquisition of a name
//     to the next (S5);
//   - lease contexts that were still live after the server had dropped the
//     lease, as seen by the observer or by a Release answering "not held"
//     to a holder whose context was still live (S2, S4);
//   - writes the fenced resource accepted with a fence smaller than one it
//     had already accepted.
//
// A restart that loses the server's data is outside S1's premise: overlaps
// and early server expiries that follow one are counted apart, as expected,
// while a stale write the fenced resource accepted fails the run whatever
// happened before it.
package chaos

import (
	"sync"
	"time"
)

// Ending is how a critical section ended.
type Ending int

const (
	EndUnknown  Ending = iota
	EndReleased        // the holder finished and released (or Do returned)
	EndLost            // the lease context was cancelled with ErrLost
	EndClosed          // the manager was closed
)

func (e Ending) String() string {
	switch e {
	case EndReleased:
		return "released"
	case EndLost:
		return "lost"
	case EndClosed:
		return "closed"
	}
	return "unknown"
}

// A Section is one critical section: a holder believing it holds a name.
type Section struct {
	ID     int // unique in the history
	Name   string
	Holder string // "m2/g5": manager and goroutine
	Token  string // empty when unknown (Do does not expose its lease)
	Fence  int64  // 0 when unknown (Do)
	// Start is when Acquire returned (or Do called the function): from then
	// on the holder believes it holds the name.
	Start time.Time
	// End is the earlier of the lease context's cancellation and the moment
	// the holder stopped its work to release. It is not when the holder
	// noticed a loss: a stalled holder's section ends when its context is
	// cancelled, whatever it does afterwards.
	End   time.Time
	Ended Ending
	// Stalled: the holder stopped looking at its context for longer than
	// its lease (a simulated GC pause) and then wrote all the same.
	Stalled bool
	// Deadline is the lease's local deadline when the holder stopped (zero
	// when unknown), for diagnostics.
	Deadline time.Time
	// UnnoticedLoss: Release answered "not held" although the lease context
	// was still live when the holder called it: the server had dropped the
	// lease while its holder still believed in it.
	UnnoticedLoss bool
}

// A Write is one attempt to write to the fenced resource of a name.
type Write struct {
	Seq      int64 // order in which the resource decided, per resource
	Section  int   // Section.ID of the writer
	Name     string
	Fence    int64
	At       time.Time
	Accepted bool
	Stale    bool // written by a stalled holder after its stall
}

// A Fault is one injected fault, from when it began to when it was undone.
type Fault struct {
	Kind  string
	Start time.Time
	End   time.Time
	// LosesData: a restart of a server without persistence. S1 holds only
	// while the server keeps its data.
	LosesData bool
}

// A Sighting is what the observer saw of one token on the server: it was
// there when a poll sent at LastSeen answered, and gone (the key absent or
// holding another value) in a poll answered at GoneBy. GoneBy is zero if it
// was never seen gone.
type Sighting struct {
	Name     string
	Token    string
	LastSeen time.Time
	GoneBy   time.Time
}

// History is everything a run recorded.
type History struct {
	Sections  []Section
	Writes    []Write
	Faults    []Fault
	Sightings []Sighting
}

// Recorder collects a History from many goroutines.
type Recorder struct {
	mu sync.Mutex
	h  History
	id int
}

// NextID returns a fresh section ID.
func (r *Recorder) NextID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.id++
	return r.id
}

// Section records a finished critical section.
func (r *Recorder) Section(s Section) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Sections = append(r.h.Sections, s)
}

// Fault records an injected fault.
func (r *Recorder) Fault(f Fault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Faults = append(r.h.Faults, f)
}

// History returns a copy of what was recorded, with the writes of store
// and the sightings given.
func (r *Recorder) History(store *Store, sightings []Sighting) History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := History{
		Sections:  append([]Section(nil), r.h.Sections...),
		Faults:    append([]Fault(nil), r.h.Faults...),
		Sightings: append([]Sighting(nil), sightings...),
	}
	if store != nil {
		h.Writes = store.Writes()
	}
	return h
}

// Store is a simulated fenced resource, one register per name: it accepts a
// write only if its fence is at least the highest it has accepted for the
// name, deciding under a mutex.
type Store struct {
	mu      sync.Mutex
	highest map[string]int64
	seq     int64
	writes  []Write
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{highest: map[string]int64{}} }

// Write offers a write with fence to name's register on behalf of section,
// and reports whether it was accepted.
func (s *Store) Write(section int, name string, fence int64, stale bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := fence >= s.highest[name]
	if ok {
		s.highest[name] = fence
	}
	s.seq++
	s.writes = append(s.writes, Write{Seq: s.seq, Section: section, Name: name, Fence: fence, At: time.Now(), Accepted: ok, Stale: stale})
	return ok
}

// Writes returns every write offered so far, in the order decided.
func (s *Store) Writes() []Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Write(nil), s.writes...)
}
