package chaos

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The linearizability check replays a history against a sequential model of
// one lock with fences, per name, with porcupine. What the model holds is a
// holder's belief, not the server's key: a holder believes from the moment
// Acquire returns until its lease context is cancelled (or it stops to
// release), so an acquisition is legal only when nobody believes, and its
// fence must exceed every fence handed out before. A lease that expired on
// the server is therefore not an event of the model: its holder's belief
// ends at its cancellation, which a correct library puts before the expiry,
// and a library that cancels late makes the next acquisition illegal.
//
// Operations, with their real-time intervals:
//
//   - acquire(section) -> fence, from the call of Acquire (or Do) to its
//     return: legal when the lock is free and fence > the largest fence yet;
//   - end(section), at the section's end: legal when the section holds the
//     lock, or lost it to a crash;
//   - write(section, fence), at the moment the fenced store took it: legal
//     when fence is the largest handed out and the writer got it, or when a
//     larger fence was handed out since (a resource that checks fences can
//     then reject it). A write whose fence ties with a newer holder's, or
//     exceeds it, is one that no fenced resource can tell apart;
//   - crash, over a data-losing fault (kill to restart or promotion), or a
//     window in which the runner was not scheduled (see heartbeat): the
//     server forgot its holder, who keeps believing (an orphan, whose end
//     is legal later) while another may acquire. Fences survive a crash: S5
//     promises them across every fault.
//
// Acquisitions that failed are left out: whatever they did on the server
// (an abandoned acquire, S7), nobody believed, and a fence they consumed
// only makes later fences larger, which the model allows.

type linKind uint8

const (
	linAcquire linKind = iota
	linEnd
	linWrite
	linCrash
)

type linInput struct {
	kind    linKind
	name    string
	section int
	fence   int64 // write's fence
	what    string
}

type linState struct {
	holder  int // the section that believes it holds; 0: nobody
	last    int // the section of the last acquisition
	fence   int64
	orphans []int // sorted: sections whose lease a crash dropped while they believed
}

// LinResult is the outcome of CheckLinearizable.
type LinResult struct {
	Result     porcupine.CheckResult // Ok, Illegal, or Unknown (timed out)
	Operations int
	Partitions int
	Took       time.Duration
	info       porcupine.LinearizationInfo
}

// Failed reports whether porcupine proved the history not linearizable.
func (r LinResult) Failed() bool { return r.Result == porcupine.Illegal }

func (r LinResult) String() string {
	if r.Operations == 0 {
		return "not checked"
	}
	what := map[porcupine.CheckResult]string{
		porcupine.Ok:      "linearizable",
		porcupine.Illegal: "NOT linearizable",
		porcupine.Unknown: "unknown (timed out: not a pass)",
	}[r.Result]
	return fmt.Sprintf("%s (%d operations on %d names, %v)", what, r.Operations, r.Partitions, r.Took.Round(time.Millisecond))
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
			f := output.(int64)
			if s.holder != 0 || (f != 0 && f <= s.fence) {
				return false, s
			}
			s.holder, s.last = in.section, in.section
			if f != 0 {
				s.fence = f
			}
			return true, s
		case linEnd:
			if s.holder == in.section {
				s.holder = 0
				return true, s
			}
			if i, ok := slices.BinarySearch(s.orphans, in.section); ok {
				s.orphans = slices.Delete(slices.Clone(s.orphans), i, i+1)
				return true, s
			}
			return false, s
		case linWrite:
			return in.fence < s.fence || (in.fence == s.fence && s.last == in.section), s
		case linCrash:
			if s.holder != 0 {
				o := append(slices.Clone(s.orphans), s.holder)
				slices.Sort(o)
				s.orphans, s.holder = o, 0
			}
			return true, s
		}
		return false, s
	},
	Equal: func(a, b any) bool {
		x, y := a.(linState), b.(linState)
		return x.holder == y.holder && x.last == y.last && x.fence == y.fence && slices.Equal(x.orphans, y.orphans)
	},
	Hash: func(state any) uint64 {
		s := state.(linState)
		var h maphash.Hash
		h.SetSeed(linSeed)
		fmt.Fprint(&h, s.holder, s.last, s.fence, s.orphans)
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		in := input.(linInput)
		switch in.kind {
		case linAcquire:
			return fmt.Sprintf("acquire #%d -> fence %d", in.section, output.(int64))
		case linEnd:
			return fmt.Sprintf("end #%d (%s)", in.section, in.what)
		case linWrite:
			return fmt.Sprintf("write #%d fence %d", in.section, in.fence)
		default:
			return "crash: " + in.what
		}
	},
	DescribeState: func(state any) string {
		s := state.(linState)
		var b strings.Builder
		if s.holder == 0 {
			b.WriteString("free")
		} else {
			fmt.Fprintf(&b, "held by #%d", s.holder)
		}
		fmt.Fprintf(&b, ", fence %d by #%d", s.fence, s.last)
		if len(s.orphans) > 0 {
			fmt.Fprintf(&b, ", orphans %v", s.orphans)
		}
		return b.String()
	},
}

// CheckLinearizable checks h against the lock model, giving up after
// timeout (then the result is Unknown, which is not a pass).
func CheckLinearizable(h History, timeout time.Duration) LinResult {
	ops := linOperations(h)
	if len(ops) == 0 {
		return LinResult{}
	}
	began := time.Now()
	res, info := porcupine.CheckOperationsVerbose(lockModel, ops, timeout)
	return LinResult{Result: res, Operations: len(ops), Partitions: len(lockModel.Partition(ops)), Took: time.Since(began), info: info}
}

func linOperations(h History) []porcupine.Operation {
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
	var ops []porcupine.Operation
	names := map[string]bool{}
	sections := map[int]Section{}
	for _, s := range h.Sections {
		if s.Kind != KindLease {
			continue // the model is a lock of one holder, with fences
		}
		names[s.Name] = true
		sections[s.ID] = s
		c := client(s.Holder)
		called := s.Called
		if called.IsZero() || called.After(s.Start) {
			called = s.Start
		}
		ops = append(ops,
			porcupine.Operation{ClientId: c, Input: linInput{kind: linAcquire, name: s.Name, section: s.ID}, Call: at(called), Output: s.Fence, Return: at(s.Start), Metadata: s.Holder},
			porcupine.Operation{ClientId: c, Input: linInput{kind: linEnd, name: s.Name, section: s.ID, what: s.Ended.String()}, Call: at(s.End), Return: at(s.End), Metadata: s.Holder},
		)
	}
	for _, w := range h.Writes {
		s, ok := sections[w.Section]
		if !ok || w.Fence == 0 || w.Refused {
			continue
		}
		ops = append(ops, porcupine.Operation{ClientId: client(s.Holder), Input: linInput{kind: linWrite, name: w.Name, section: w.Section, fence: w.Fence}, Call: at(w.At), Return: at(w.At), Output: nil, Metadata: s.Holder})
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	for _, f := range h.Faults {
		// A runner that went unscheduled longer than the slack is, to the
		// model, a crash as seen from the holder's side: the server let
		// its lease go while the holder, not running, still believed.
		if !f.LosesData && !f.Starved {
			continue
		}
		for _, n := range sorted {
			ops = append(ops, porcupine.Operation{ClientId: client("faults"), Input: linInput{kind: linCrash, name: n, what: f.Kind}, Call: at(f.Start), Return: at(f.End)})
		}
	}
	slices.SortStableFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	return ops
}
