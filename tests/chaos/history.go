// Package chaos checks tenure's promise — never two holders, and you always
// know when you lost — against the recorded history of a run under faults.
//
// A run (chaos_test.go, behind the build tag "chaos") records every critical
// section, every write to a fenced resource, every fault it injected and
// what an observer saw on the server; Check then looks for:
//
//   - overlaps: two holders of one name whose lease contexts were live at
//     the same instant (S1); for a semaphore, more live permits than its
//     n, and for a read-write lock a writer beside anyone;
//   - fences that did not strictly increase from one acquisition of a name
//     to the next (S5); for a semaphore or a read-write lock, whose holders
//     overlap, a fence handed out twice, or one not above the fence of a
//     section that ended before its Acquire was called;
//   - lease contexts that were still live after the server had dropped the
//     lease (its key's TTL ran out, or the key was seen gone), or when a
//     Release answered "not held" to a holder whose context was still live
//     (S2, S4);
//   - stale writes a correct fenced resource would have accepted: a holder
//     superseded by a newer one wrote after the newer one had written, with
//     a fence the newer one's did not exceed (S5, as a resource sees it).
//
// CheckLinearizable replays the same history against a model of a lock
// with fences (linearize.go).
//
// A fault that brings the server back without the data it acknowledged
// (empty, from an older snapshot, with the tail of its AOF lost, or a
// lagging replica promoted) is outside S1's premise: overlaps and early
// server expiries that follow one are counted apart, as expected, while S5
// must hold across it, so fences and stale writes are judged whatever
// happened before them.
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

// A Kind is what a section held.
type Kind uint8

const (
	KindLease  Kind = iota // a lease: alone
	KindPermit             // one of Limit permits of a semaphore
	KindRead               // a read lock: beside other readers, no writer
	KindWrite              // a write lock: alone
)

func (k Kind) String() string {
	return [...]string{"lease", "permit", "read lock", "write lock"}[k]
}

// exclusive reports whether a holder of kind k must be alone.
func (k Kind) exclusive() bool { return k == KindLease || k == KindWrite }

// A Section is one critical section: a holder believing it holds a name.
type Section struct {
	ID     int // unique in the history
	Name   string
	Kind   Kind
	Limit  int    // a permit's semaphore's n
	Count  int    // permits a permit section holds at once (AcquireN); 0 means 1
	Holder string // "m2/g5": manager and goroutine
	Token  string // empty when unknown
	Fence  int64  // 0 when unknown
	// Called is when the holder called Acquire (or Do); zero when unknown.
	Called time.Time
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

// permits is how many permits s holds: Count, or 1.
func (s Section) permits() int { return max(s.Count, 1) }

// A Write is one write to the fenced resource of a name. The store takes
// every write: whether a fenced resource should have rejected it is the
// checker's judgement, from the fences the library granted.
type Write struct {
	Seq     int64 // order in which the store took the writes
	Section int   // Section.ID of the writer
	Name    string
	Fence   int64
	At      time.Time
	Stalled bool // written by a stalled holder after its stall
	// Refused: a real fenced resource (History.Guarded) refused the write
	// as stale; it wrote nothing.
	Refused bool
}

// A Fault is one injected fault, from when it began to when it was undone.
type Fault struct {
	Kind  string
	Start time.Time
	End   time.Time
	// LosesData: the server came back without data it had acknowledged
	// (none, an older snapshot, a lost AOF tail, a lagging replica). S1
	// holds only while the server keeps its data; S5 holds across it.
	LosesData bool
	// Starved: the runner's own process was not scheduled for longer than
	// the watchdog's slack (its heartbeat came late by that much), so a
	// lease context could not be cancelled in time whatever the library
	// did. S1 holds only while the holder's clock and scheduler behave.
	Starved bool
	// Detail says where, for diagnostics: which client's proxy, or when a
	// lagging replica stopped receiving.
	Detail string
}

// A Sighting is what the observer saw of one token on the server, in one
// appearance: it was there from the poll sent at FirstSeen to the one sent
// at LastSeen, and gone (the key absent or holding another value) in a poll
// answered at GoneBy; GoneBy is zero if it was never seen gone. ExpiresAt is
// when the key's TTL would have run out, as the last poll of the appearance
// read it (PEXPIRETIME, plus the millisecond Redis still serves the key in):
// the earliest moment the server could let another holder in unless the key
// went earlier. A token seen gone and then back (a client library's retry
// of an acquire on a promoted replica that had not heard of the first; a
// restart from an older snapshot) has one Sighting per appearance.
type Sighting struct {
	Name      string
	Token     string
	FirstSeen time.Time
	LastSeen  time.Time
	GoneBy    time.Time
	ExpiresAt time.Time
}

// History is everything a run recorded.
type History struct {
	Sections []Section
	Writes   []Write
	// Guarded: the writes went to a real fenced resource (Config's
	// Resource), which refuses stale writes itself; their Seq is its order
	// of the writes it took.
	Guarded   bool
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

// Store stands for the resources the holders write to. It takes every
// write and records its order: a store that rejected stale writes itself
// would leave the checker only its own rule to re-test, and a library whose
// fences repeat would pass.
type Store struct {
	mu     sync.Mutex
	seq    int64
	writes []Write
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{} }

// Write records a write with fence to name's resource on behalf of section.
func (s *Store) Write(section int, name string, fence int64, stalled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.writes = append(s.writes, Write{Seq: s.seq, Section: section, Name: name, Fence: fence, At: time.Now(), Stalled: stalled})
}

// Record records a write whose order (and fate) a real resource decided.
func (s *Store) Record(w Write) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, w)
}

// Writes returns every write so far, in the order taken.
func (s *Store) Writes() []Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Write(nil), s.writes...)
}
