// Package redisson takes the locks that Java services take with Redisson:
// the same keys, fields, scripts' effects and messages, so that a Go
// service and a Java service exclude each other on one name. Go holders
// get tenure's watchdog: a context cancelled before Redis could let anyone
// else in, renewal and release that check the holder's field, loss
// detection, and errors for errors.Is (lease.ErrNotAcquired,
// lease.ErrLost, lease.ErrNotHeld, lease.ErrReleased, lease.ErrClosed).
//
// The protocol was read from Redisson's own source, versions 3.24.0 to
// 3.52.0 (RedissonLock, RedissonBaseLock, RedissonFencedLock,
// RedissonFairLock, RedissonReadLock, RedissonWriteLock, LockPubSub,
// RedissonPermitExpirableSemaphore, SemaphorePubSub,
// renewal.LockTask and ReadLockTask, Config): their lock scripts do the
// same from 3.24 on, but for the watchdog, which renews each lock alone
// before 3.44 and in batches since, with the same effect on each lock,
// and for the RFairLock's queue keys, which 3.52 names after the mapped
// name and earlier versions after the name as given (the same without a
// NameMapper: see docs/design.md section 13 for the other differences). tenure's scripts
// (scripts/*.lua) are its own, written from that reading.
//
// # The locks
//
//   - Client.GetLock is an RLock: a hash at the name (as the NameMapper
//     maps it: WithNamePrefix), whose one field <client id>:<thread id>
//     counts its holder's entries. The last unlock deletes the hash and
//     publishes "0" on redisson_lock__channel:{NAME}.
//   - Client.GetFencedLock is an RFencedLock: each entry also draws a token
//     with INCR from redisson_lock_token:{NAME}, the counter Java's draws
//     from (Hold.Token). Like Java's, that counter never expires.
//   - Client.GetReadWriteLock is an RReadWriteLock: one hash with a "mode"
//     field ("read" or "write"), each reader's field with its count, a
//     writer's field ending in ":write"; each read entry i of a reader has
//     a key {NAME}:<field>:rwlock_timeout:<i> with its own TTL, from which
//     a reader's unlock sets the hash's; messages go on
//     redisson_rwlock:{NAME} ("0" from a reader, "1" from a writer).
//   - Client.GetFairLock is an RFairLock: an RLock's hash, whose waiters
//     queue first come, first served in redisson_lock_queue:{NAME}, each
//     with a timeout in redisson_lock_timeout:{NAME} (a time in the wall
//     clock of the client that queued it), and each listening on its own
//     channel, redisson_lock__channel:{NAME}:<field>. A release publishes
//     "0" to the first waiter alone; a Lock that gives up leaves the queue
//     as Java's acquireFailed does, and passes on a wake that may have
//     been its own. TryLock never queues, and never jumps a waiter.
//   - Client.GetPermitExpirableSemaphore is an RPermitExpirableSemaphore:
//     the free permits an integer at the name, each permit taken a 16-byte
//     id (32 hex digits as Java shows it) in the sorted set {NAME}:timeout,
//     scored with its expiry in the wall clock of the client that took it.
//     The server never expires a permit: whoever looks next (an acquire,
//     AvailablePermits, UpdateLeaseTime) reclaims those expired in its own
//     clock. A release publishes the number of free permits on
//     redisson_sc:{NAME}, which wakes as many waiters. A permit lives for
//     its lease time, or until released, and is never renewed, as in
//     Redisson; a Go Permit's context ends before its expiry in this
//     host's clock (Permit). AcquireN takes several permits in one
//     script, as Java's acquire(n) sends them, all or none; ReleaseIDs
//     gives several back all or none, as Java's release(ids): nothing
//     when any id is not held or has expired.
//   - Client.GetMultiLock is a RedissonMultiLock: several locks of the
//     Client, of any kinds, taken as one under one owner, all or none,
//     each renewed by the Client's watchdog. It writes nothing of its own:
//     each name is its lock's. It takes them in one order, by Key, where
//     Redisson takes them in the order given and breaks a circular wait
//     by giving all back after a wait time; a MultiHold's context ends
//     when any of its holds ends, with that hold's cause.
//
// An owner is a pair (client id, thread id) that a context carries
// (WithOwner), as package reentrant carries its owner: a Lock under a
// context whose owner holds the lock enters it again, and every Hold's
// context carries its owner. Without one, Lock makes a fresh owner: the
// Client's id, a random thread id. The Client's id is a fresh random UUID
// (WithClientID sets one). A goroutine id is never used: work moves
// between goroutines, and they come and go.
//
// Lock.IsLocked, HoldCount, IsHeldByOwner and RemainingTTL answer what
// RLock's isLocked, getHoldCount, isHeldByThread and remainTimeToLive do,
// for Go and Java holders alike; HoldCount and IsHeldByOwner ask about the
// owner the context carries.
//
// # Redisson's methods, and tenure's names for them
//
// Every method of RLock, RFencedLock, RReadWriteLock, RFairLock and
// RPermitExpirableSemaphore (their Async, Rx and Reactive twins alike),
// and what tenure offers for it. A Java "thread" is the owner a context
// carries (WithOwner); a Java wait time is the context's deadline.
//
//	Redisson                            tenure
//	RLock, RFairLock, RFencedLock, either half of an RReadWriteLock
//	  lock()                            Lock.Lock (renewed by the watchdog)
//	  lock(leaseTime)                   Lock.LockFor (never renewed)
//	  lockInterruptibly(...)            Lock.Lock, LockFor: ctx ends the wait
//	  tryLock()                         Lock.TryLock
//	  tryLock(waitTime)                 Lock.Lock, ctx with a deadline
//	  tryLock(waitTime, leaseTime)      Lock.LockFor, ctx with a deadline
//	  unlock()                          Hold.Unlock (per entry)
//	  forceUnlock()                     Lock.ForceUnlock
//	  isLocked()                        Lock.IsLocked
//	  isHeldByCurrentThread(),
//	  isHeldByThread(id)                Lock.IsHeldByOwner
//	  getHoldCount()                    Lock.HoldCount
//	  remainTimeToLive()                Lock.RemainingTTL
//	  getName()                         Lock.Name (Key: the mapped name)
//	  newCondition()                    not offered: Redisson throws
//	                                    UnsupportedOperationException too
//	  deleteAsync/expire/... (RObject)  not offered: a lock's keys are its
//	                                    holders'; use ForceUnlock
//	RFencedLock
//	  lockAndGetToken(), tryLockAndGetToken(...)
//	                                    Lock, TryLock, LockFor, then
//	                                    Hold.Token
//	  getToken()                        not offered: the counter's current
//	                                    value fences nothing; a Hold's own
//	                                    token does (Hold.Token)
//	RReadWriteLock
//	  readLock(), writeLock()           ReadWriteLock.ReadLock, WriteLock;
//	                                    a reader's write lock is ErrUpgrade
//	RPermitExpirableSemaphore
//	  acquire(), acquire(leaseTime)     PermitSemaphore.Acquire (0: none)
//	  tryAcquire(), tryAcquire(wait,
//	  lease)                            TryAcquire; Acquire with a ctx
//	                                    deadline
//	  release(id), tryRelease(id)       PermitSemaphore.Release, Permit.Release
//	  availablePermits()                AvailablePermits
//	  trySetPermits(n), setPermits(n)   TrySetPermits, SetPermits
//	  addPermits(n)                     AddPermits
//	  updateLeaseTime(id, lease)        Permit.UpdateLeaseTime
//	  acquire(n), acquire(n, lease)     AcquireN, all or none
//	  tryAcquire(n)                     TryAcquireN
//	  tryAcquire(n, wait, lease)        AcquireN, ctx with a deadline
//	  release(ids), tryRelease(ids)     ReleaseIDs, all or none; an id not
//	                                    held is lease.ErrNotHeld (Java's 0,
//	                                    or its exception)
//	  acquiredPermits()                 AcquiredPermits
//	  getLeaseTime(id)                  LeaseTime (-1ns without a lease
//	                                    time; lease.ErrNotHeld for an id
//	                                    not taken); Permit.Deadline gives a
//	                                    Go permit's local end
//	RedissonMultiLock (getMultiLock)    Client.GetMultiLock
//	  lock(), lockInterruptibly()       MultiLock.Lock
//	  lock(lease)                       MultiLock.LockFor
//	  tryLock()                         MultiLock.TryLock
//	  tryLock(wait), tryLock(wait,
//	  lease)                            Lock, LockFor, ctx with a deadline
//	  unlock()                          MultiHold.Unlock
//	  isHeldByThread(id),
//	  isHeldByCurrentThread()           MultiLock.IsHeldByOwner
//	  forceUnlock(), isLocked(),
//	  getHoldCount(), getName(),
//	  remainTimeToLive(),
//	  newCondition(), listeners         not offered: Redisson throws
//	                                    UnsupportedOperationException too;
//	                                    ask each Lock
//	RedissonRedLock                     not offered: deprecated by Redisson;
//	                                    tenure's quorum mode is the lease's
//	                                    (package lease, several servers)
//
// A re-entry with a fixed lease, or into a hold that has one, is refused
// (ErrLeaseReentry): Redisson sets the hash's TTL to the new entry's
// lease, which could cut a longer one short under its holder. A Lock with
// no owner in its context refused beside the Client's own hold says so
// (ErrHeldHere), naming the owner to lock under.
//
// Each unlock carries a fresh request id and Redisson's unlock latch
// (3.24+): redisson_unlock_latch:{NAME}:<request id> remembers the answer
// for WithUnlockLatchTimeout (at most the watchdog timeout), so an unlock
// whose reply was lost is sent once more and answered from the latch, not
// applied twice. Nobody reads another client's latch, so each is left to
// expire.
//
// # Watchdog and TTL
//
// A Go hold lives WithWatchdogTimeout (default 30s, Redisson's
// lockWatchdogTimeout) and is renewed every third of it by tenure's
// package watchdog; its context is cancelled by the local deadline,
// sent + ttl − drift, sent being when the request that set the TTL was
// sent (docs/design.md S2). A renewal that finds the field gone loses the
// hold with lease.ErrLost; one that cannot reach Redis retries until the
// deadline. A holder also listens to its lock's channel (the
// subscription its Client's waiters on it use, shared): a force unlock
// publishes what a release does, and on any message the holder looks at
// its field at once, its hold ending with lease.ErrLost wrapping
// ErrForceUnlocked when it is gone, rather than a third of the TTL later.
// tenure's renewal sets a TTL only when it lengthens it; a Java
// reader's renewal sets the read-write lock's hash to its own watchdog
// time outright, so a Go TTL above the Java services' would be cut short:
// New refuses a WithWatchdogTimeout above WithJavaWatchdogTimeout
// (default 30s), for every kind of lock.
//
// # Pub/sub
//
// On one server (or a Sentinel group) releases are PUBLISHed, as Redisson
// does. On a Cluster, Redisson 3.22+ with its default
// shardedSubscriptionMode AUTO publishes with SPUBLISH and listens with
// SSUBSCRIBE (Redis 7.0+), and with OFF uses PUBLISH and SUBSCRIBE: a Go
// Client publishes with SPUBLISH by default (WithSharding(ShardedOff) for
// a Java fleet with OFF), and its
// waiters on a Cluster listen to both kinds, so that they hear every Java
// client. A waiter subscribes before it looks again, and looks when a
// message wakes it, at the holder's TTL (a holder can die) and at its
// backoff step (WithBackOff). As in Redisson's LockPubSub, a "0" wakes one
// waiter of the Client (the first not woken yet) and a "1" every one; a
// waiter that leaves without the lock passes its wake on. A channel is
// subscribed while someone in the Client waits on it or holds its lock (a
// holder listens for a force unlock), on connections the whole Client
// shares: one classic pub/sub connection, and on a Cluster one sharded
// connection per primary besides; an RFairLock's waiters each wait on a
// channel of their own. BenchmarkHeldLocks measures a held name's cost.
//
// # What holds when Go and Java share a name
//
// Promise by promise; each is tested (the test names are in brackets,
// those under TestDeployments run on one server and on a Cluster).
//
//	Promise                                      Go holders   Go beside Java holders
//	-------------------------------------------  -----------  ------------------------------------
//	Mutual exclusion while Redis keeps the hash  holds        holds while the Java holder's lock
//	  [NoOverlap, ReadWriteNoOverlap]                         lives; see "outlives" below
//	A release wakes the other side's waiters     holds        holds: "0"/"1" on Redisson's channel,
//	  [GoReleaseWakesJava, JavaReleaseWakesGo,                PUBLISH or SPUBLISH, both heard
//	  WaitersOfOneClient]
//	Re-entry counts, entries of one owner        holds        holds on both sides [ReentryCounts,
//	                                                          SharedOwnerAgainstJava,
//	                                                          TestEntryAfterUnnoticedLoss]
//	The read-write lock's mode follows its       holds        holds [ReadWriteModes, Downgrade]
//	  holders
//	A dead holder's lock expires                 holds        holds: a Go waiter gets a dead Java
//	                                                          holder's lock at its TTL
//	                                                          [DeadJavaHolderExpires]
//	Context cancelled before the server expiry   holds        holds for the Go holder
//	  [TestCancelledBeforeServerExpiry]
//	A lock or permit whose acquire reply came    holds        holds for the Go holder
//	  after ttl − drift is never handed over:
//	  given back, and the wait goes on
//	  [TestLateLockReplyNotHandedOver,
//	  TestLateLockReplyGivenBack,
//	  TestLatePermitReplyNotHandedOver,
//	  TestLatePermitReplyGivenBack]
//	Field-checked unlock and renewal; a second   holds        holds for the Go holder
//	  unlock or one after loss is ErrNotHeld
//	  [ReentryCounts, ForceUnlockIsLoss]
//	Loss detection at the next renewal (ErrLost) holds        holds for the Go holder, a Java
//	  [ForceUnlockIsLoss, TestDoReportsLoss]                  forceUnlock included
//	A force unlock's message ends the hold at    holds        holds for the Go holder, either
//	  once, not at the next renewal                           kind of pub/sub on a Cluster
//	  [TestJavaForceUnlockEndsHold]
//	Exec writes only while held; Do reports loss holds        holds for the Go holder
//	  [TestExecWritesOnlyWhileHeld, TestDoReportsLoss]
//	A resent unlock is applied once (latch)      holds        holds [TestUnlockLatchAnswersACopy]
//	An acquire whose reply timed out is taken    holds        holds for the Go holder
//	  back, no phantom for a TTL (S7)
//	  [TestTimedOutAcquireLeavesNoPhantom]
//	Renewal never shortens the hash              holds        Go's never does; Java's reader sets
//	  [JavaReadUnlockSeesGoReaders,                           its own TTL, so Go's TTL must not
//	  TestOptionsAreValidated]                                exceed Java's: checked by New
//	A read unlock keeps the hash for the other   holds        holds: Go's timeout keys are named
//	  readers [JavaReadUnlockSeesGoReaders]                   as Java's
//	Close releases and tells waiters             holds        holds [TestCloseReleasesAndTellsJava]
//	Fencing tokens from one counter              RFencedLock  RFencedLock on both sides: holds
//	  [FencedTokens]                                          [FencedTokens]; plain RLock holders
//	                                                          draw none: cannot
//	RFairLock: first come, first served, Go and  same as      holds while the clients' clocks agree
//	  Java in one queue [FairOrder,              beside Java  and no waiter outwaits its slot (its
//	  FairReentryAndForceUnlock]                              timeout, in its own clock: the one
//	                                                          before it's plus its wait); a skewed
//	                                                          clock can reorder or drop waiters;
//	                                                          exclusion (the hash) is unaffected
//	RFairLock: a release wakes the first waiter  holds        holds: "0" on the waiter's own
//	  [FairGoReleaseWakesJava,                                channel, both pub/sub kinds
//	  FairJavaReleaseWakesGo]
//	RFairLock: a waiter that gives up, or dies,  same as      a Go waiter leaves the queue (Java's
//	  does not hold up the queue                 beside Java  acquireFailed); a dead one, Go or
//	  [FairGiveUpLeavesQueue,                                 Java, is skipped once its timeout has
//	  FairDeadJavaWaiterSkipped,                              passed in the clock of whoever looks
//	  TestFairLeavePassesWake]                                next
//	RPermitExpirableSemaphore: never more        holds        holds while no holder outlives its
//	  holders than permits [SemNoOverlap]                     permit and the clocks agree
//	RPermitExpirableSemaphore: a release wakes   holds        holds: the free count on
//	  the other side [SemReleaseWakes]                        redisson_sc:{NAME}, both kinds
//	RPermitExpirableSemaphore: an expired        holds        holds, at the expiry in the clock
//	  permit is reclaimed                                     of whoever looks next
//	  [SemDeadJavaPermitReclaimed]
//	RPermitExpirableSemaphore: a Go permit's     holds        holds in this host's clock; a
//	  context ends before its expiry                          client whose clock runs ahead can
//	  [SemGoPermitEndsFirst]                                  reclaim it sooner
//	RPermitExpirableSemaphore: a release of an   holds        holds (lease.ErrNotHeld)
//	  id not held fails [SemReleaseErrors]
//	RPermitExpirableSemaphore: a shorter lease   holds        holds in this host's clock
//	  moves the local deadline before it is
//	  sent [TestShorterLeaseMovesDeadlineFirst]
//	RPermitExpirableSemaphore: a permit updated  holds        holds: given back by UpdateLeaseTime,
//	  after its local end, or whose update went               its local deadline or Close
//	  unanswered, is given back, never forgotten
//	  [TestPermitUpdatedAfterItsEndIsGivenBack]
//	RPermitExpirableSemaphore: several permits   holds        holds: one script takes n ids, or
//	  taken or released all or none                           none; a release of ids, all or none
//	  [SemAcquireNJava, SemAcquireNWaits,                     [SemAcquireNJava]
//	  SemReleaseIDs, TestLateAcquireNReplyGivenBack]
//	MultiLock: all or none, one order, each      holds        holds against Java holders of its
//	  hold renewed, any loss ends the MultiHold               names [MultiAllOrNone,
//	  [MultiAllOrNone, MultiOrder, MultiLoss,                 MultiWaitsForJava]
//	  MultiWatchdog]
//	RPermitExpirableSemaphore: renewal           none         none, as in Redisson: a fixed lease
//	                                                          time, or none
//	Exclusion against a Java holder that         n/a          cannot: Redisson never tells a Java
//	  outlives its lock                                       holder its renewal failed, so its
//	                                                          thread may run on after the hash
//	                                                          expired and a Go holder took it
//	                                                          [DeadJavaHolderExpires]
//
// Redisson sends its lock scripts without retries (syncedEvalNoRetry): a
// lock script that ran twice would count one entry twice. New refuses a
// go-redis client that resends them (MaxRetries above 0 once go-redis has
// normalized it: its default, 0, means 3 retries), with an error saying to
// set MaxRetries: -1 [TestNewRefusesResendingClient]. A ClusterClient's
// nodes do not retry by default, but the ClusterClient itself sends a
// command again after a network error, within the MaxRedirects attempts
// with which it follows MOVED and ASK: that is not refused, for it cannot
// be turned off without losing the redirections.
//
// What no lock can promise (docs/design.md, "What no lease can promise")
// applies on both sides: a pause longer than the hold's remaining life, a
// clock jump on the Redis host, a failover that loses the hash.
package redisson
