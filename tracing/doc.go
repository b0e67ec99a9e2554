// Package tracing reports what tenure's leases do to OpenTelemetry: a span
// for every acquire, explicit extend and release, a span covering each hold,
// and metrics for acquisitions, renewals, losses and hold times. It
// implements lease.Hooks; package lease itself does not import OpenTelemetry.
//
//	inst, err := tracing.New() // the global TracerProvider and MeterProvider
//	if err != nil {
//		return err
//	}
//	m, err := lease.New(client, lease.WithHooks(inst.Hooks()))
//
// WithTracerProvider and WithMeterProvider choose other providers. Tracers
// and meters are named after this package's import path (ScopeName), with
// the tenure module's version when the build records one.
//
// # Spans
//
// Spans are named after the operation, never after the lease's name, which
// goes in the tenure.lease.name attribute (names may be many: one a user, one
// a file). All are of kind Internal: one operation may take several round
// trips to Redis, which a Redis client's own instrumentation reports as
// Client spans.
//
//   - "tenure.lease.acquire": one Acquire, TryAcquire or the acquisition of
//     Manager.Do, from start to result. Attributes: tenure.lease.name,
//     tenure.lease.acquire.attempts, tenure.lease.acquire.wait (seconds,
//     float), tenure.lease.acquire.result ("acquired", "not_acquired" or
//     "error"), tenure.lease.fence when acquired, and error.type on error.
//     Finding the name held (lease.ErrNotAcquired: TryAcquire, or a wait that
//     ran out) is an outcome, not a failure: the status stays unset. Any other
//     error sets the Error status.
//   - "tenure.lease.hold": the lease's own span, from the acquire's result to
//     the end of the lease, a child of the acquire span. The lease's context
//     carries the acquire span, so work done under Lease.Context() is a child
//     of the acquire span too, and a sibling of the hold span. A renewal that
//     failed (and is retried until the local deadline) is an event
//     "tenure.lease.renewal.failed" with error.type; a loss is an event
//     "tenure.lease.lost" with tenure.lease.loss.cause ("deleted",
//     "taken_over" or "expired") and sets the Error status. When the span ends it gets
//     tenure.lease.end.cause ("released", "lost" or "closed"). A failed
//     renewal alone does not set the Error status: the lease may still be
//     renewed in time, and a hold that ended well is not an error.
//   - "tenure.lease.extend": one Lease.Extend, a child of the context passed
//     to it, with tenure.lease.name, tenure.lease.fence and tenure.lease.ttl
//     (seconds, float); Error status when Extend returns an error.
//   - "tenure.lease.release": one Lease.Release (or the release at the end of
//     Manager.Do), a child of the context passed to it, linked to the hold
//     span; Error status when Release returns an error, ErrNotHeld included
//     (error.type "not_held": the lease had been lost or taken over).
//
// Renewals get no span: a process holding 100,000 leases renews thousands a
// second. They are counted instead, and only a failed one touches a span.
//
// # Metrics
//
// No metric carries the lease's name, whose cardinality is the user's;
// attributes are a handful of fixed values, precomputed, so that the
// renewal hook, which runs on the watchdog's goroutines, does not allocate.
//
//   - tenure.lease.acquire.duration (histogram, s): every acquisition, by
//     tenure.lease.acquire.result (and error.type on error).
//   - tenure.lease.wait.duration (histogram, s): acquisitions that found the
//     name held and waited (more than one attempt), by result: contention.
//   - tenure.lease.held (up-down counter, {lease}): leases held now.
//   - tenure.lease.renewals (counter, {renewal}): automatic renewals, by
//     tenure.lease.renewal.result ("renewed" or "failed").
//   - tenure.lease.losses (counter, {lease}): every lease lost, by
//     tenure.lease.loss.cause, the hold span's value: "deleted" (the key was
//     deleted or expired on the server: a restart without data, an
//     eviction, tenure release --force), "taken_over" (another token holds
//     it) or "expired" (no renewal confirmed before the local deadline). A
//     reason a later lease package adds is counted under its own value, and
//     a loss without a reason under "unknown".
//   - tenure.lease.hold.duration (histogram, s): how long leases were held,
//     by tenure.lease.end.cause.
//
// # Logs
//
// Package lease already logs through log/slog (lease.WithLogger): a lost
// lease is a Warn record with the name, fence and cause, and nothing is
// logged per renewal above Debug. This package adds no logging of its own.
package tracing
