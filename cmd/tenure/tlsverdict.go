package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"
)

// tlsVerdictWait is how long tlsVerdict waits for the server to speak
// after the handshake: a server that refuses the client's certificate says
// so at once, and one that accepted it says nothing until asked.
const tlsVerdictWait = time.Second

// explainClosed is err, the failure of the first command sent to t, unless
// the server closed a TLS connection on it without an answer and, asked
// again without being sent anything, gives a certificate as the reason:
// then it is that refusal.
//
// Over TLS 1.3 the client's side of the handshake completes before the
// server has judged the client's certificate (or its absence). A server
// that refuses it then sends an alert and closes. A client that has
// already written its first command may meet the close as a reset and
// never read the alert, and whether it does is a race: the same refusal
// was reported once as a certificate (exitRefused) and once as an outage
// (exitRedis). The second connection writes nothing, so the alert is read.
// Only the first contact is explained this way: later, a closed connection
// is an outage.
func (t *target) explainClosed(ctx context.Context, err error) error {
	if t.tls == nil || !closedByPeer(err) {
		return err
	}
	var network, addr string
	switch t.kind {
	case kindServer:
		network, addr = t.opts.Network, t.opts.Addr
	case kindCluster:
		addr = t.addrs[0]
	default:
		// A Sentinel group: its data nodes' addresses come from the
		// sentinels, whose own first contact askSentinel explains.
		return err
	}
	return t.explainClosedAt(ctx, network, addr, err)
}

// explainClosedAt is explainClosed for the server at addr: err, or the
// certificate refusal that server gives when asked again.
func (t *target) explainClosedAt(ctx context.Context, network, addr string, err error) error {
	if t.tls == nil || !closedByPeer(err) {
		return err
	}
	if network == "" {
		network = "tcp"
	}
	if v := tlsVerdict(ctx, network, addr, t.tls); v != nil {
		// v first: refusal reads the first net.OpError the chain holds,
		// and the reset is one too.
		return fmt.Errorf("%w (the server closed the connection after the TLS handshake: %w)", v, err)
	}
	return err
}

// closedByPeer reports whether err is the other end closing the connection.
func closedByPeer(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// tlsVerdict dials addr, completes a TLS handshake with conf and, sending
// nothing, waits tlsVerdictWait for the server to speak. It returns the
// certificate refusal the server gives (an alert, or a failed handshake),
// or nil when it gives none.
func tlsVerdict(ctx context.Context, network, addr string, conf *tls.Config) error {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	d := tls.Dialer{Config: conf}
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		if refusal(err) == "tls" {
			return err
		}
		return nil
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(tlsVerdictWait))
	_, err = conn.Read(make([]byte, 1))
	if refusal(err) == "tls" {
		return err
	}
	return nil
}
