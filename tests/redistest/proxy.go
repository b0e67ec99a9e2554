package redistest

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	// proxyDialTimeout bounds the proxy's dial to its target per accepted
	// connection.
	proxyDialTimeout = 5 * time.Second
	// proxyQueue is how many chunks may wait for their latency per
	// direction before the reader stops reading (TCP backpressure then
	// reaches the sender).
	proxyQueue = 256
	// latencyRecheck bounds how long a delayed chunk sleeps before looking
	// at the latency again, so SetLatency applies to queued data promptly.
	latencyRecheck = 20 * time.Millisecond
)

// Proxy is an in-process TCP proxy from 127.0.0.1:random to a target
// address. Point one client at Addr instead of the server to slow it down,
// cut it off or reset its connections while other clients keep talking to the
// server directly.
//
// Each connection has an independent reader and writer per direction, so
// latency delays every connection by the same amount without serializing
// them, and bytes keep their order within a direction.
type Proxy struct {
	ln     net.Listener
	target atomic.Pointer[string]

	latency   atomic.Int64 // time.Duration
	blackhole atomic.Bool
	accepted  atomic.Int64

	ctx    context.Context // canceled by Close: aborts dials and sleeps
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the proxy started

	mu     sync.Mutex
	links  map[*link]struct{} // guarded by mu
	closed bool               // guarded by mu

	closeOnce sync.Once
	closeErr  error

	// afterDial, when set (by tests), runs between a connection's dial
	// and its registration, to hold a dial there while the target changes.
	afterDial atomic.Pointer[func()]
}

// NewProxy starts a proxy listening on a free port on 127.0.0.1 that forwards
// every accepted connection to target. The caller must Close it.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{ln: ln, ctx: ctx, cancel: cancel, links: make(map[*link]struct{})}
	p.target.Store(&target)
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// StartProxy is NewProxy for tests; the proxy is closed in tb.Cleanup.
func StartProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := NewProxy(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// Addr returns the proxy's "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return *p.target.Load() }

// SetTarget points the proxy at another address, as a failover points
// clients at a promoted replica: connections accepted from then on are
// forwarded to target. Existing connections keep their server; call
// ResetConnections to move them too.
func (p *Proxy) SetTarget(target string) { p.target.Store(&target) }

// SetLatency sets a delay added to every chunk of data forwarded, in each
// direction (a request/response round trip is therefore delayed by about
// 2*d). Order within a direction is kept. It applies to existing connections
// and to data already waiting in the proxy. 0 means no delay.
func (p *Proxy) SetLatency(d time.Duration) {
	if d < 0 {
		d = 0
	}
	p.latency.Store(int64(d))
}

// Latency returns the current latency.
func (p *Proxy) Latency() time.Duration { return time.Duration(p.latency.Load()) }

// BlackHole turns the black hole on or off. While on, connections stay open
// and new ones are accepted (and dialed through to the target when it is
// reachable), but no data is forwarded in either direction: whatever is read
// while the hole is on, or was still waiting out its latency when it opened,
// is discarded, not held. A client therefore sees its commands time out, and
// after BlackHole(false) only data sent from then on flows again (go-redis
// drops a connection whose command timed out, so its next command works on a
// fresh connection). Connection closes are still propagated, so closed
// clients do not pile up server connections.
func (p *Proxy) BlackHole(on bool) { p.blackhole.Store(on) }

// Silence has every connection open now die silently, as a NAT table, a
// load balancer or a firewall that forgot it does to a pooled connection:
// it stays open, and nothing more is forwarded on it in either direction,
// for good, whatever was already on its way. Connections accepted later
// are not touched. Closes are still propagated, as with the black hole.
// It returns how many connections it silenced.
func (p *Proxy) Silence() int {
	links := p.snapshot()
	for _, l := range links {
		l.silent.Store(true)
	}
	return len(links)
}

// BlackHoled reports whether the black hole is on.
func (p *Proxy) BlackHoled() bool { return p.blackhole.Load() }

// Accepted returns how many client connections the proxy has accepted so far.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Conns returns how many connections are currently open through the proxy.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// ResetConnections closes every current connection abruptly (RST on both
// sides). New connections are accepted as usual.
func (p *Proxy) ResetConnections() {
	for _, l := range p.snapshot() {
		l.close(true)
	}
}

// Close stops the listener, resets all connections and waits until every
// goroutine of the proxy has exited. It is idempotent.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.cancel()
		p.closeErr = p.ln.Close()
		p.ResetConnections()
		p.wg.Wait()
	})
	return p.closeErr
}

func (p *Proxy) snapshot() []*link {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls := make([]*link, 0, len(p.links))
	for l := range p.links {
		ls = append(ls, l)
	}
	return ls
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || p.ctx.Err() != nil {
				return
			}
			// Transient (e.g. EMFILE): back off instead of spinning.
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		p.accepted.Add(1)
		// The dial happens off the accept loop so a slow target does not
		// hold up other clients.
		p.wg.Add(1)
		go p.handle(c)
	}
}

func (p *Proxy) handle(client net.Conn) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: proxyDialTimeout}
	target := p.Target()
	server, err := d.DialContext(p.ctx, "tcp", target)
	if f := p.afterDial.Load(); f != nil {
		(*f)() // tests: a dial that lost the race with SetTarget
	}
	if err != nil && !p.blackhole.Load() {
		// Without the black hole, an unreachable target is passed on
		// to the client: its connection is reset at once.
		abort(client)
		return
	}
	// With the black hole on, a client connection whose dial failed is
	// still kept open, as the black hole promises; it stays a sink that
	// discards its data even after the hole closes, until the client gives
	// up on it.
	l := &link{p: p, client: client, done: make(chan struct{})}
	if err == nil {
		l.server = server
	}
	if !p.register(l) {
		l.close(true)
		return
	}
	// SetTarget came between the dial and the registration, so the
	// ResetConnections that follows it may have missed this link: it must
	// not stay on the old target (after a failover, a server restarted
	// there would answer as a stale primary, then as a replica).
	if p.Target() != target {
		l.close(true)
		return
	}
	if l.server == nil {
		p.wg.Add(1)
		go l.sink()
		return
	}
	l.pipe(client, l.server)
	l.pipe(l.server, client)
}

func (p *Proxy) register(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.links[l] = struct{}{}
	return true
}

func (p *Proxy) unregister(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.links, l)
}

// abort closes c with an RST rather than a FIN.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// link is one proxied client connection and its server connection (nil for
// a black-holed connection whose dial failed).
type link struct {
	p              *Proxy
	client, server net.Conn
	done           chan struct{} // closed by close
	once           sync.Once
	eofs           atomic.Int32 // directions that finished with a clean EOF
	silent         atomic.Bool  // Silence: forwards nothing more
}

// dropping reports whether data on l is discarded: the black hole is on,
// or l was silenced.
func (l *link) dropping() bool { return l.p.blackhole.Load() || l.silent.Load() }

// chunk is data read from one side, stamped with its read time so the writer
// can hold it until at+latency; eof marks a clean end of the direction.
type chunk struct {
	data []byte
	at   time.Time
	eof  bool
}

// close tears down both connections once; abrupt sends RSTs.
func (l *link) close(abrupt bool) {
	l.once.Do(func() {
		close(l.done)
		for _, c := range []net.Conn{l.client, l.server} {
			if c == nil {
				continue
			}
			if abrupt {
				abort(c)
			} else {
				_ = c.Close()
			}
		}
		l.p.unregister(l)
	})
}

// pipe starts the reader and writer for the direction src -> dst.
func (l *link) pipe(src, dst net.Conn) {
	q := make(chan chunk, proxyQueue)
	l.p.wg.Add(2)
	go l.read(src, q)
	go l.write(dst, q)
}

// read moves data from src into q, dropping it while the black hole is on.
// It never sleeps for latency, so a slow direction does not stop reading.
func (l *link) read(src net.Conn, q chan<- chunk) {
	defer l.p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !l.dropping() {
			c := chunk{data: append([]byte(nil), buf[:n]...), at: time.Now()}
			select {
			case q <- c:
			case <-l.done:
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				// Forward the FIN after the data queued before it.
				select {
				case q <- chunk{eof: true}:
				case <-l.done:
				}
			} else {
				l.close(true)
			}
			return
		}
	}
}

// write sends chunks from q to dst once their latency has passed.
func (l *link) write(dst net.Conn, q <-chan chunk) {
	defer l.p.wg.Done()
	for {
		var c chunk
		select {
		case c = <-q:
		case <-l.done:
			return
		}
		if c.eof {
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			// Both directions ended cleanly: nothing more can flow.
			if l.eofs.Add(1) == 2 {
				l.close(false)
			}
			return
		}
		if !l.sleepLatency(c.at) {
			return
		}
		if l.dropping() {
			continue
		}
		if _, err := dst.Write(c.data); err != nil {
			l.close(true)
			return
		}
	}
}

// sleepLatency waits until at plus the current latency, rechecking the
// latency periodically so SetLatency affects data already queued. It reports
// false if the link was closed meanwhile.
func (l *link) sleepLatency(at time.Time) bool {
	for {
		wait := time.Until(at.Add(l.p.Latency()))
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(min(wait, latencyRecheck))
		select {
		case <-t.C:
		case <-l.done:
			t.Stop()
			return false
		}
	}
}

// sink reads and discards everything from a black-holed client that has no
// server connection, until the client goes away or the link is closed.
func (l *link) sink() {
	defer l.p.wg.Done()
	_, _ = io.Copy(io.Discard, l.client)
	l.close(false)
}
