// Package election elects one leader among candidates for a name, on the
// leases of package lease: leadership is holding the lease on the name, and
// the lease's context is the leading context.
//
//	e, err := election.New(election.Config{
//		Manager:  m, // from lease.New(client): the record is read through client
//		Name:     "scheduler",
//		Identity: hostname,
//	})
//	err = e.Run(ctx, election.Callbacks{
//		OnStartedLeading: func(ctx context.Context) {
//			rec, _ := election.Leading(ctx) // this term's identity and fence
//			schedule(ctx, rec.Fence)        // until ctx is cancelled
//		},
//		OnStoppedLeading: func() { log.Print("no longer leading") },
//		OnNewLeader:      func(id string) { log.Print("leader: ", id) },
//	})
//
// Run campaigns until its context ends or Resign is called: it waits for the
// lease (woken by the release message when the leader lets go, or by the
// leader's TTL running out when it died), writes the leader record, calls
// OnStartedLeading with the leading context, and when that context ends
// (the lease was lost, Resign, ctx, or the manager closed) waits for
// OnStartedLeading to return, removes the record, releases the lease and
// calls OnStoppedLeading. After a loss it campaigns again.
//
// # What is promised
//
// The leading context is the lease's context (with Run's context and Resign
// added): it is cancelled no later than the lease's local deadline, before
// Redis can let another candidate in. A leader cut off from Redis therefore
// stops leading before any other starts, as long as its own clock and
// scheduler behave. Each term's fence (Record.Fence, the lease's fencing
// token) is greater than every earlier term's: pass it to the resources the
// leader writes to so they can reject a deposed leader that was paused past
// its lease (see package lease, "What is not promised").
//
// Leadership moves in a few round trips when a leader resigns, returns from
// Run or closes its manager (the release wakes the waiting candidates), and
// within the TTL when it dies without letting go.
//
// # The leader record
//
// For a name N and the key prefix P ("tenure:" by default), the leader
// writes the hash P{N}:leader with the fields identity and fence right after
// it wins, through Lease.Exec, so it is written only while its lease holds
// the name, and publishes the fence on the channel P{N}:leader:changed. The
// lease's random token is never written there. A reader (Leader, Observe,
// the tenure command) takes the record as the current leader only if, in
// one MULTI/EXEC, the lease key P{N} exists as a lease (a string) and the
// record's fence equals the name's fencing counter P{N}:fence: a counter
// that moved on means another acquisition took the name since. A stale
// record (its leader died) is thus never reported. The next leader
// overwrites it and a leader that resigns deletes it; it expires with the
// leadership lease's TTL, which the leader refreshes while its term lasts,
// so a leader that dies or is closed leaves no key behind for good.
//
// Observers learn of a new leader by the change message, of a leader that
// let go by the lease's release message (P{N}:released), and of a leader
// that died by the lease key's TTL running out, which they wait for; they
// also look again every RetryPeriod in case a message was lost.
//
// # Health
//
// IsLeader reports, without a round trip, whether a term of this process's
// Run has begun and its leading context has not ended. Check and
// HealthHandler are a liveness check in the way of client-go's
// leader-election health adaptor: they fail (ErrStuck, HTTP 503) when a
// term is still under way more than a tolerance after its leading context
// ended or its lease's local deadline passed, which only an
// OnStartedLeading that ignores its context can cause; such a process holds
// the name (its lease is renewed until the callback returns) while it no
// longer leads, and a restart lets another candidate lead. Package tracing
// reports IsLeader as a gauge (Instrumentation.ObserveElection).
package election
