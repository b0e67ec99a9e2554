package backend

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// errNodeDown is the outcome of a renewal not sent, because its Cluster
// node could not be reached a moment ago: unknown, so the watchdog tries
// again, by when the node is back or its replica serves the slot.
var errNodeDown = errors.New("renewal not sent: its Cluster node could not be reached a moment ago")

// downRecheck is how long a Cluster node that could not be reached is
// skipped before a renewal probes it again.
const downRecheck = 200 * time.Millisecond

// probeTimeout bounds the probe's dial: a dead process refuses at once; a
// host that drops packets would hold a renewal batch up to this long.
const probeTimeout = 100 * time.Millisecond

// downNodes is the Cluster nodes that renewals could not reach, by address,
// with when that was last found. Renewals for such a node are not sent
// while it is down. go-redis would dial it again for each pipeline that
// holds one of its calls (five tries, 100ms apart, several times per
// pipeline), and a renewal batch holds the leases of every node: one dead
// primary held up the renewals of the live ones with it, until leases on
// live nodes were lost too (bench scenario 10).
type downNodes struct {
	mu sync.Mutex
	at map[string]time.Time
}

// mark records addr as not reachable now.
func (d *downNodes) mark(addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.at == nil {
		d.at = map[string]time.Time{}
	}
	d.at[addr] = time.Now()
}

// skip reports whether renewals for addr are to be held back: it was
// found down less than downRecheck ago, or a probe (a TCP dial, through
// dial) finds it down still. One caller probes at a time: the others skip
// meanwhile.
func (d *downNodes) skip(ctx context.Context, addr string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) bool {
	d.mu.Lock()
	at, ok := d.at[addr]
	if !ok {
		d.mu.Unlock()
		return false
	}
	if time.Since(at) < downRecheck {
		d.mu.Unlock()
		return true
	}
	d.at[addr] = time.Now() // this caller probes
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return true
	}
	_ = conn.Close()
	d.mu.Lock()
	delete(d.at, addr)
	d.mu.Unlock()
	return false
}

// dialer returns how the client dials a node: its own Dialer, if it has
// one, so that the probe goes where the client's connections go.
func dialerOf(c redis.UniversalClient) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if cc, ok := c.(*redis.ClusterClient); ok && cc.Options().Dialer != nil {
		return cc.Options().Dialer
	}
	var d net.Dialer
	return d.DialContext
}
