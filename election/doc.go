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
// within the TTL when it dies without letting go. A lease lost under a term
// is still released, in the background once OnStartedLeading has
// returned: a renewal that Redis applied but answered after the lease's
// local deadline may have kept its key, which would keep every candidate
// out for up to a TTL.
//
// # The leader record
//
// For a name N and the key prefix P ("tenure:" by default), the leader
// writes the hash P{N}:leader with the fields identity, fence and lease
// right after it wins, and publishes the fence on the channel
// P{N}:leader:changed. A script writes it, on Config.Client's server, only
// while the lease key P{N} there holds the leader's lease token, so a
// leader that lost the name writes nothing. The token itself is never
// written there: the lease field is a digest of it. A reader (Leader,
// Observe, the tenure command) takes the record as the current leader only
// if, in one MULTI/EXEC, P{N} is a lease (a string, not the revocation
// marker "tenure release --force" leaves) and the record's lease digest is
// that of P{N}'s value: a stale record (its leader died, lost the name, or
// was revoked) is thus never reported. The next leader overwrites it and a
// term that ends deletes it while its lease still holds the name; it
// expires with the leadership lease's TTL, which the leader refreshes
// while its term lasts, so a leader that dies or is closed leaves no key
// behind for good.
//
// # Managers
//
// A candidate leads on every Manager: lease.New's, lease.NewQuorum's and
// package leasetest's, since the record needs nothing of the Manager but
// the lease's token. On lease.New's, the record lives beside the lease and
// a term cannot begin without it. On a quorum, give as Client one of its
// servers: the record is kept there while that server holds the lease (a
// majority may hold it without that server), and the leader leads whether
// or not it could be written; the leader rewrites it at every refresh, so
// a server that missed it gets it once it holds the lease. Observers read
// that one server, which may lag the majority's decision by a round trip.
// On leasetest's the lease lives in memory, not on Client's server: the
// leader leads and no record is written, so observers see no leader.
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
// OnStartedLeading that ignores its context can cause (a term whose
// callback has returned and whose release waits on Redis is over, for Check
// as for IsLeader); such a process holds
// the name (its lease is renewed until the callback returns) while it no
// longer leads, and a restart lets another candidate lead. Package tracing
// reports IsLeader as a gauge (Instrumentation.ObserveElection).
package election
