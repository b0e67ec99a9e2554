package chaos

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The linearizability check replays a history against a sequential model,
// per name, with porcupine: one model for every kind, a name holding either
// one exclusive holder (a lease, a write lock) or shared holders (permits of
// a semaphore of n, at most n counting a hold of k as k; read locks, any
// number), never both, with fences. What the model holds is a holder's
// belief, not the server's key: a holder believes from the moment Acquire
// returns until its lease context is cancelled (or it stops to release), so
// an acquisition is legal only when the beliefs allow it, and its fence
// must exceed every fence handed out before for the name (S5: permits and
// read locks take fences from the name's one counter too). A lease that
// expired on the server is therefore not an event of the model: its
// holder's belief ends at its cancellation, which a correct library puts
// before the expiry, and a library that cancels late makes the next
// acquisition illegal.
//
// Operations, with their real-time intervals:
//
//   - acquire(section, kind, k, n) -> fence, from the call of Acquire (or
//     Do) to its return: legal when the beliefs allow it (exclusive: no
//     holder; a permit: no exclusive holder and at most n permits with it;
//     a read lock: no exclusive holder) and fence > the largest fence yet;
//   - end(section), at the section's end: legal when the section holds, or
//     lost its hold to a crash;
//   - write(section, fence), at the moment the fenced store took it: legal
//     when fence is the largest handed out and the writer got it, or when a
//     larger fence was handed out since (a resource that checks fences can
//     then reject it). A write whose fence ties with a newer holder's, or
//     exceeds it, is one that no fenced resource can tell apart;
//   - crash, over a data-losing fault (kill to restart or promotion), or a
//     window in which the runner was not scheduled (see heartbeat): the
//     server forgot its holders, who keep believing (orphans, whose end is
//     legal later) while others may acquire. Fences survive a crash: S5
//     promises them across every fault;
//   - cut(fence, last), first in a part of a cut history (cut below).
//
// Acquisitions that failed are left out: whatever they did on the server
// (an abandoned acquire, S7), nobody believed, and a fence they consumed
// only makes later fences larger, which the model allows.
//
// Cutting. A 30-minute run has well over 100,000 operations, which
// porcupine cannot search as a few long histories in minutes. So each
// name's history is cut where it is quiescent: every section acquired
// before the cut has ended before it, and no operation's interval spans it
// (an operation returned before the cut, or is called after it). Real-time
// order then puts every operation before the cut ahead of every one after
// it in any linearization, and the model's state at the cut is the same in
// every linearization of the part before: nobody holds and nobody is
// orphaned (each section's end removed it), the largest fence is the
// largest granted before the cut, and the last acquisition is the one that
// got it (fences strictly increase). So the history is linearizable if and
// only if each part is, the part after a cut starting from that state,
// which a seed operation sets. A part with an acquisition of unknown fence
// (0) is not cut after it: its last acquisition would not be known.

type linKind uint8

const (
	linAcquire linKind = iota
	linEnd
	linWrite
	linCrash
	linCut
)

type linInput struct {
	kind    linKind
	name    string // the name, and the part of its history ("res0#3")
	section int
	fence   int64 // write's fence; seed's largest fence
	what    string
	hold    Kind // acquire: what the section holds
	count   int  // acquire: permits it holds at once (1 for others)
	limit   int  // acquire of a permit: the semaphore's n
}

// A linHold is a shared holder and how many permits it holds.
type linHold struct{ section, count int }

type linState struct {
	holder  int       // the section that believes it holds exclusively; 0: nobody
	shared  []linHold // sorted by section: shared holders
	last    int       // the section of the last acquisition
	fence   int64
	orphans []int // sorted: sections whose hold a crash dropped while they believed
}

func (s linState) held() int {
	n := 0
	for _, h := range s.shared {
		n += h.count
	}
	return n
}

// LinResult is the outcome of CheckLinearizable: the verdict over every
// kind, and each kind's (Kinds).
type LinResult struct {
	Result     porcupine.CheckResult // Ok, Illegal, or Unknown (timed out)
	Operations int
	Partitions int // parts of the names' histories checked apart (see Cutting)
	Names      int
	Took       time.Duration
	Kinds      []LinKind
	info       porcupine.LinearizationInfo
}

// LinKind is porcupine's verdict on the names of one kind: "lease" (leases
// and sets of them), "permit" (semaphores) or "rw" (read-write locks).
type LinKind struct {
	Kind                     string
	Result                   porcupine.CheckResult
	Operations, Parts, Names int
	Took                     time.Duration
}

// Failed reports whether porcupine proved the history not linearizable.
func (r LinResult) Failed() bool { return r.Result == porcupine.Illegal }

var linVerdicts = map[porcupine.CheckResult]string{
	porcupine.Ok:      "linearizable",
	porcupine.Illegal: "NOT linearizable",
	porcupine.Unknown: "unknown (timed out: not a pass)",
}

func (r LinResult) String() string {
	if r.Operations == 0 {
		return "not checked"
	}
	return fmt.Sprintf("%s (%d operations on %d names in %d parts, %v)", linVerdicts[r.Result], r.Operations, r.Names, r.Partitions, r.Took.Round(time.Millisecond))
}

func (k LinKind) String() string {
	return fmt.Sprintf("%s (%d operations on %d names in %d parts, %v)", linVerdicts[k.Result], k.Operations, k.Names, k.Parts, k.Took.Round(time.Millisecond))
}

// Visualize writes porcupine's HTML visualisation of the check to path.
func (r LinResult) Visualize(path string) error {
	return porcupine.VisualizePath(lockModel, r.info, path)
}

var linSeed = maphash.MakeSeed()

var lockModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byName := map[string][]porcupine.Operation{}
		var names []string
		for _, op := range history {
			n := op.Input.(linInput).name
			if _, ok := byName[n]; !ok {
				names = append(names, n)
			}
			byName[n] = append(byName[n], op)
		}
		slices.Sort(names)
		out := make([][]porcupine.Operation, 0, len(names))
		for _, n := range names {
			out = append(out, byName[n])
		}
		return out
	},
	Init: func() any { return linState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in := state.(linState), input.(linInput)
		switch in.kind {
		case linAcquire:
			return s.acquire(in, output.(int64))
		case linEnd:
			return s.end(in.section)
		case linWrite:
			return in.fence < s.fence || (in.fence == s.fence && s.last == in.section), s
		case linCrash:
			o := slices.Clone(s.orphans)
			if s.holder != 0 {
				o = append(o, s.holder)
			}
			for _, h := range s.shared {
				o = append(o, h.section)
			}
			slices.Sort(o)
			s.orphans, s.holder, s.shared = o, 0, nil
			return true, s
		case linCut:
			if s.holder != 0 || len(s.shared) > 0 || len(s.orphans) > 0 || s.fence != 0 {
				return false, s
			}
			s.fence, s.last = in.fence, in.section
			return true, s
		}
		return false, s
	},
	Equal: func(a, b any) bool {
		x, y := a.(linState), b.(linState)
		return x.holder == y.holder && x.last == y.last && x.fence == y.fence && slices.Equal(x.orphans, y.orphans) &&
			slices.Equal(x.shared, y.shared)
	},
	Hash: func(state any) uint64 {
		s := state.(linState)
		var h maphash.Hash
		h.SetSeed(linSeed)
		fmt.Fprint(&h, s.holder, s.last, s.fence, s.orphans, s.shared)
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		in := input.(linInput)
		switch in.kind {
		case linAcquire:
			if in.count > 1 {
				return fmt.Sprintf("acquire #%d (%d %ss of %d) -> fence %d", in.section, in.count, in.hold, in.limit, output.(int64))
			}
			return fmt.Sprintf("acquire #%d (%s) -> fence %d", in.section, in.hold, output.(int64))
		case linEnd:
			return fmt.Sprintf("end #%d (%s)", in.section, in.what)
		case linWrite:
			return fmt.Sprintf("write #%d fence %d", in.section, in.fence)
		case linCut:
			return fmt.Sprintf("cut: fence %d by #%d", in.fence, in.section)
		default:
			return "crash: " + in.what
		}
	},
	DescribeState: func(state any) string {
		s := state.(linState)
		var b strings.Builder
		switch {
		case s.holder != 0:
			fmt.Fprintf(&b, "held by #%d", s.holder)
		case len(s.shared) > 0:
			fmt.Fprintf(&b, "shared by %v (%d)", s.shared, s.held())
		default:
			b.WriteString("free")
		}
		fmt.Fprintf(&b, ", fence %d by #%d", s.fence, s.last)
		if len(s.orphans) > 0 {
			fmt.Fprintf(&b, ", orphans %v", s.orphans)
		}
		return b.String()
	},
}

// acquire is the model's step for an acquisition with fence f.
func (s linState) acquire(in linInput, f int64) (bool, linState) {
	if s.holder != 0 || (f != 0 && f <= s.fence) {
		return false, s
	}
	switch {
	case in.hold.exclusive():
		if len(s.shared) > 0 {
			return false, s
		}
		s.holder = in.section
	case in.hold == KindPermit && s.held()+in.count > in.limit:
		return false, s
	default:
		sh := append(slices.Clone(s.shared), linHold{in.section, in.count})
		slices.SortFunc(sh, func(a, b linHold) int { return cmp.Compare(a.section, b.section) })
		s.shared = sh
	}
	s.last = in.section
	if f != 0 {
		s.fence = f
	}
	return true, s
}

// end is the model's step for section's end.
func (s linState) end(section int) (bool, linState) {
	if s.holder == section {
		s.holder = 0
		return true, s
	}
	if i := slices.IndexFunc(s.shared, func(h linHold) bool { return h.section == section }); i >= 0 {
		s.shared = slices.Delete(slices.Clone(s.shared), i, i+1)
		return true, s
	}
	if i, ok := slices.BinarySearch(s.orphans, section); ok {
		s.orphans = slices.Delete(slices.Clone(s.orphans), i, i+1)
		return true, s
	}
	return false, s
}

// CheckLinearizable checks h against the model, each kind's names apart,
// each name's history cut where it is quiescent, giving up after timeout
// (then the result is Unknown, which is not a pass).
func CheckLinearizable(h History, timeout time.Duration) LinResult {
	byKind, names := linOperations(h)
	if len(byKind) == 0 {
		return LinResult{}
	}
	out := LinResult{Result: porcupine.Ok}
	began := time.Now()
	for _, kind := range []string{"lease", "permit", "rw"} {
		ops := byKind[kind]
		if len(ops) == 0 {
			continue
		}
		left := max(timeout-time.Since(began), time.Millisecond)
		t0 := time.Now()
		res, info := porcupine.CheckOperationsVerbose(lockModel, ops, left)
		k := LinKind{Kind: kind, Result: res, Operations: len(ops), Parts: len(lockModel.Partition(ops)), Names: names[kind], Took: time.Since(t0)}
		out.Kinds = append(out.Kinds, k)
		out.Operations += k.Operations
		out.Partitions += k.Parts
		out.Names += k.Names
		switch {
		case res == porcupine.Illegal && out.Result != porcupine.Illegal:
			out.Result, out.info = res, info
		case res == porcupine.Unknown && out.Result == porcupine.Ok:
			out.Result, out.info = res, info
		}
	}
	out.Took = time.Since(began)
	return out
}

// kindFamily is the kind whose verdict a section's name counts in.
func kindFamily(k Kind) string {
	switch k {
	case KindPermit:
		return "permit"
	case KindRead, KindWrite:
		return "rw"
	}
	return "lease"
}

// linOperations are h's operations by kind, each name's history cut into
// parts, and how many names each kind has.
func linOperations(h History) (map[string][]porcupine.Operation, map[string]int) {
	var base time.Time
	first := true
	see := func(t time.Time) {
		if !t.IsZero() && (first || t.Before(base)) {
			base, first = t, false
		}
	}
	for _, s := range h.Sections {
		see(s.Called)
		see(s.Start)
	}
	for _, f := range h.Faults {
		see(f.Start)
	}
	// Offsets from one base keep the monotonic readings the times carry.
	at := func(t time.Time) int64 { return int64(t.Sub(base)) }

	clients := map[string]int{}
	client := func(holder string) int {
		if id, ok := clients[holder]; ok {
			return id
		}
		clients[holder] = len(clients)
		return len(clients) - 1
	}
	byName := map[string][]porcupine.Operation{}
	family := map[string]string{}
	sections := map[int]Section{}
	for _, s := range h.Sections {
		family[s.Name] = kindFamily(s.Kind)
		sections[s.ID] = s
		c := client(s.Holder)
		called := s.Called
		if called.IsZero() || called.After(s.Start) {
			called = s.Start
		}
		acq := linInput{kind: linAcquire, name: s.Name, section: s.ID, hold: s.Kind, count: 1, limit: s.Limit}
		if s.Kind == KindPermit {
			acq.count = s.permits()
		}
		byName[s.Name] = append(byName[s.Name],
			porcupine.Operation{ClientId: c, Input: acq, Call: at(called), Output: s.Fence, Return: at(s.Start), Metadata: s.Holder},
			porcupine.Operation{ClientId: c, Input: linInput{kind: linEnd, name: s.Name, section: s.ID, what: s.Ended.String()}, Call: at(s.End), Return: at(s.End), Metadata: s.Holder},
		)
	}
	for _, w := range h.Writes {
		s, ok := sections[w.Section]
		if !ok || w.Fence == 0 || w.Refused {
			continue
		}
		byName[w.Name] = append(byName[w.Name], porcupine.Operation{ClientId: client(s.Holder), Input: linInput{kind: linWrite, name: w.Name, section: w.Section, fence: w.Fence}, Call: at(w.At), Return: at(w.At), Output: nil, Metadata: s.Holder})
	}
	for _, f := range h.Faults {
		// A runner that went unscheduled longer than the slack is, to the
		// model, a crash as seen from the holder's side: the server let
		// its holds go while the holder, not running, still believed.
		if !f.LosesData && !f.Starved {
			continue
		}
		for n := range byName {
			byName[n] = append(byName[n], porcupine.Operation{ClientId: client("faults"), Input: linInput{kind: linCrash, name: n, what: f.Kind}, Call: at(f.Start), Return: at(f.End)})
		}
	}
	byKind := map[string][]porcupine.Operation{}
	names := map[string]int{}
	sorted := slices.Sorted(maps.Keys(byName))
	for _, n := range sorted {
		ops := byName[n]
		slices.SortStableFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		byKind[family[n]] = append(byKind[family[n]], cut(n, ops)...)
		names[family[n]]++
	}
	return byKind, names
}

// cut cuts one name's operations, sorted by call, where the name is
// quiescent (see Cutting in the comment at the top): each part gets the
// name "NAME#i", and each part after the first starts with a seed of the
// state every linearization of what came before ends in.
func cut(name string, ops []porcupine.Operation) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	open := map[int]bool{} // sections acquired and not yet ended
	var (
		part      int
		lastRet   = int64(math.MinInt64)
		fence     int64
		bySection int
		unknown   bool // an acquisition of unknown fence: no cut after it
		inPart    int  // operations in the current part
	)
	for _, op := range ops {
		in := op.Input.(linInput)
		if inPart > 0 && len(open) == 0 && lastRet < op.Call && !unknown {
			part++
			inPart = 0
			out = append(out, porcupine.Operation{ClientId: op.ClientId, Input: linInput{kind: linCut, name: fmt.Sprintf("%s#%d", name, part),
				section: bySection, fence: fence}, Call: op.Call - 1, Return: op.Call - 1})
		}
		switch in.kind {
		case linAcquire:
			open[in.section] = true
			switch f := op.Output.(int64); {
			case f == 0:
				unknown = true
			case f > fence:
				fence, bySection = f, in.section
			}
		case linEnd:
			delete(open, in.section)
		}
		lastRet = max(lastRet, op.Return)
		in.name = fmt.Sprintf("%s#%d", name, part)
		op.Input = in
		out = append(out, op)
		inPart++
	}
	return out
}
