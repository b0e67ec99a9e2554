package watchdog

// Shedding: what the watchdog does not send, and for how long.
//
// Its contract: a renewal is set aside only while the watchdog is
// overloaded (capacity.go, a fact: demand over capacity, or a renewal kept
// waiting for a worker; never a slow server or link, whose answers may
// still come in time) and only if its lease's loss is nearer than the quickest answer of the
// last seconds (rtt.go's floor): even an answer as quick as the quickest
// one seen could not come in time. Its share of the workers then goes to
// leases that can still be saved. A set-aside lease is not given up: it
// goes back to the ready list as soon as either fact no longer holds (the
// watchdog caught up, or a quicker answer came), and it is lost only at its
// loss time, with ErrBehind, if it never went back. The order of losses
// under overload follows from the ready list's: nearest loss first, so the
// leases lost are those whose loss times come soonest while the backlog
// lasts.

// hopeless, under w.mu, reports whether e should be set aside now: the
// watchdog is overloaded (shed) and e's loss is nearer than the floor.
func (w *Watchdog[I]) hopeless(e *Entry[I], now int64, shed bool) bool {
	if !shed {
		return false
	}
	f := w.trips.floor(now)
	return f > 0 && e.lossAt-now < int64(f)
}

// readmit, under w.mu, puts back on the ready list the set-aside leases
// that can be sent again, drops those no longer waiting (released, lost),
// and reports whether any went back.
func (w *Watchdog[I]) readmit(now int64) bool {
	if len(w.aside) == 0 {
		return false
	}
	shed := w.overloaded(now)
	back := false
	kept := w.aside[:0]
	for _, e := range w.aside {
		switch {
		case e.state != waiting || e.lossAt <= now:
			// Gone, or lost by the scheduler's next sweep.
		case w.hopeless(e, now, shed):
			kept = append(kept, e)
		default:
			w.pushReady(e, e.readyAt)
			back = true
		}
	}
	clear(w.aside[len(kept):])
	w.aside = kept
	return back
}
