package election

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/lease"
)

// The leader record is written and deleted by scripts that check, in the
// same step, that the lease's token holds the name's key on the server
// they run on (Config.Client's). A script needs nothing of the Manager but
// the lease's token, so this works on whatever Manager holds the lease:
//
//   - lease.New's: the record lives beside the lease, and a script that
//     finds the lease gone means it was deleted or taken over (e.strict).
//   - lease.NewQuorum's, with Client one of its servers: the record is
//     written there while that server holds the lease, which a majority
//     may do without it; a leader leads whether or not it could be, and
//     rewrites it at every refresh, so a server that missed it (down when
//     the term began) gets it once it holds the lease.
//   - leasetest's: the lease lives in memory, never on Client's server,
//     so no record is ever written and observers see no leader.
//
// A transaction through Lease.Exec (WATCH, GET, MULTI) would do the same on
// one Redis, but only lease.New's Manager offers it: a quorum cannot
// guard one transaction across servers, and leasetest has no Redis.

//go:embed record_write.lua
var recordWriteSrc string

//go:embed record_delete.lua
var recordDeleteSrc string

var (
	recordWrite  = backend.NewScript(recordWriteSrc)
	recordDelete = backend.NewScript(recordDeleteSrc)
)

// errNotHolding is what a record script found where the lease lives on
// Client's Redis (e.strict): the lease no longer holds the name.
var errNotHolding = fmt.Errorf("%w: the lease no longer holds the name; the leader record was not written", lease.ErrLost)

// writeRecord writes the record at the start of a term, within the
// term's round-trip bound.
func (e *Election) writeRecord(ctx context.Context, l *lease.Lease, rec Record) error {
	ctx, cancel := context.WithTimeout(ctx, e.opTimeout())
	defer cancel()
	return e.putRecord(ctx, l, rec)
}

// putRecord writes rec while l holds the name on Client's server, and
// tells observers when the record's fence is new there. On one server the
// message goes from the script. On a Cluster it follows the script: a
// server without SPUBLISH would refuse it inside. It returns an error
// wrapping errNotHolding when the lease does not hold the name there.
func (e *Election) putRecord(ctx context.Context, l *lease.Lease, rec Record) error {
	sharded := backend.Sharded(e.cfg.Client)
	channel := e.keys.changed
	if sharded {
		channel = ""
	}
	n, err := recordWrite.Run(ctx, e.cfg.Client, []string{e.keys.lease, e.keys.record},
		l.Token(), rec.Identity, rec.Fence, e.ttl.Milliseconds(), channel, leaseDigest(l.Token())).Int64()
	switch {
	case err != nil:
		return err
	case n == 0:
		return errNotHolding
	case n == 2 && sharded:
		e.announce(ctx, rec.Fence)
	}
	return nil
}

// deleteRecord deletes the record while l holds the name on Client's
// server; where it does not, the record is a successor's, or none, and is
// left alone.
func (e *Election) deleteRecord(ctx context.Context, l *lease.Lease) error {
	return recordDelete.Run(ctx, e.cfg.Client, []string{e.keys.lease, e.keys.record}, l.Token()).Err()
}

// leaseDigest is the record's "lease" field: a short hash of the lease's
// stored value (its token), by which a reader tells that the record is the
// one of the lease that holds the name, on whatever server it reads,
// without the token being written anywhere else. It is package inspect's
// Holding.ID of that lease, so that inspect checks the record the same way
// (inspect's TestRead reads a term's record through it).
func leaseDigest(value string) string {
	s := sha256.New()
	s.Write([]byte(value))
	s.Write([]byte{0})
	return hex.EncodeToString(s.Sum(nil)[:12])
}
