package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs are a certificate authority made for one test, a server
// certificate it signed for 127.0.0.1, and a client certificate it signed
// for mutual TLS. Everything lives in memory until a server writes it to
// its directory; nothing is read from or written to the machine's trust
// store.
type Certs struct {
	// CAPEM is the authority's certificate, PEM-encoded: what a client
	// trusts (tenure's --redis-ca and the like take this file).
	CAPEM []byte
	// ServerCertPEM and ServerKeyPEM are the server's certificate (for IP
	// 127.0.0.1) and its private key.
	ServerCertPEM, ServerKeyPEM []byte
	// ClientCertPEM and ClientKeyPEM are a client certificate and key the
	// authority signed, for a server that authenticates clients.
	ClientCertPEM, ClientKeyPEM []byte

	pool   *x509.CertPool
	client tls.Certificate
}

// NewCerts makes a fresh authority and the two certificates it signs
// (ECDSA P-256, valid from an hour ago for a day, so that a clock a little
// off does not matter).
func NewCerts() (*Certs, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("redistest: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	leaf := func(cn string, usage x509.ExtKeyUsage, ips []net.IP) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, fmt.Errorf("redistest: %s certificate: %w", cn, err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
	}
	c := &Certs{CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	if c.ServerCertPEM, c.ServerKeyPEM, err = leaf("redistest server", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)}); err != nil {
		return nil, err
	}
	if c.ClientCertPEM, c.ClientKeyPEM, err = leaf("redistest client", x509.ExtKeyUsageClientAuth, nil); err != nil {
		return nil, err
	}
	c.pool = x509.NewCertPool()
	c.pool.AddCert(ca)
	if c.client, err = tls.X509KeyPair(c.ClientCertPEM, c.ClientKeyPEM); err != nil {
		return nil, err
	}
	return c, nil
}

// MustCerts is NewCerts for tests.
func MustCerts(tb testing.TB) *Certs {
	tb.Helper()
	c, err := NewCerts()
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n.Add(n, big.NewInt(1))
}

// ClientConfig returns a TLS client configuration that trusts the
// authority, with the client certificate when withCert. The server name
// is left to the dialer, which checks the server's certificate against the
// address's IP, 127.0.0.1.
func (c *Certs) ClientConfig(withCert bool) *tls.Config {
	cfg := &tls.Config{RootCAs: c.pool, MinVersion: tls.VersionTLS12}
	if withCert {
		cfg.Certificates = []tls.Certificate{c.client}
	}
	return cfg
}

// WriteFiles writes the PEM files into dir (ca.crt, server.crt,
// server.key, client.crt, client.key; the keys readable by the owner only)
// and returns their paths, by those names.
func (c *Certs) WriteFiles(dir string) (map[string]string, error) {
	files := map[string][]byte{
		"ca.crt": c.CAPEM, "server.crt": c.ServerCertPEM, "server.key": c.ServerKeyPEM,
		"client.crt": c.ClientCertPEM, "client.key": c.ClientKeyPEM,
	}
	paths := make(map[string]string, len(files))
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			return nil, fmt.Errorf("redistest: writing %s: %w", p, err)
		}
		paths[name] = p
	}
	return paths, nil
}

// TLS makes a server TLS-only: it listens with --tls-port on its port, and
// --port 0 turns its plain TCP port off, as a managed Redis that requires
// TLS does. Its replication runs over TLS (tls-replication yes), and so do
// a Cluster node's bus (tls-cluster yes) and a sentinel's links; the nodes
// of a Cluster or Sentinel group share one Certs. The harness's readiness probe speaks TLS too (with the client
// certificate), so Pause, Kill and Restart work as on a plain server.
type TLS struct {
	// Certs are the certificates the server presents and trusts; nil
	// makes fresh ones (Server.Certs returns them).
	Certs *Certs
	// AuthClients is tls-auth-clients: "yes" (a client must present a
	// certificate the authority signed), "no", or "optional". Empty means
	// Redis's default, "yes".
	AuthClients string
}

// prepareTLS checks the TLS settings, makes certificates if none were
// given and writes them into the server's directory, before the first
// start.
func (s *Server) prepareTLS() error {
	t := s.cfg.TLS
	if t == nil {
		return nil
	}
	switch t.AuthClients {
	case "", "yes", "no", "optional":
	default:
		return fmt.Errorf("redistest: TLS.AuthClients %q: want yes, no or optional", t.AuthClients)
	}
	cp := *t
	if cp.Certs == nil {
		c, err := NewCerts()
		if err != nil {
			return err
		}
		cp.Certs = c
	}
	s.cfg.TLS = &cp
	paths, err := cp.Certs.WriteFiles(s.dir)
	if err != nil {
		return err
	}
	s.tlsFiles = paths
	return nil
}

// tlsConf is the TLS part of the config file. A TLS-only server has no
// plain port, so everything it dials runs over TLS too: replication (and a
// sentinel's links to the servers and to other sentinels, which Sentinel
// ties to tls-replication), and on a Cluster node the cluster bus. On those
// links it presents the client certificate: the server certificate is for
// server authentication only, which a peer with tls-auth-clients yes would
// refuse as a client's.
func (s *Server) tlsConf() string {
	t := s.cfg.TLS
	auth := t.AuthClients
	if auth == "" {
		auth = "yes"
	}
	conf := fmt.Sprintf("port 0\ntls-port %d\ntls-cert-file %q\ntls-key-file %q\ntls-ca-cert-file %q\ntls-auth-clients %s\n",
		s.port, s.tlsFiles["server.crt"], s.tlsFiles["server.key"], s.tlsFiles["ca.crt"], auth) +
		fmt.Sprintf("tls-client-cert-file %q\ntls-client-key-file %q\ntls-replication yes\n",
			s.tlsFiles["client.crt"], s.tlsFiles["client.key"])
	if s.kind == kindCluster {
		conf += "tls-cluster yes\n"
	}
	return conf
}

// Certs returns the certificates of a TLS server, nil for a plain one.
func (s *Server) Certs() *Certs {
	if s.cfg.TLS == nil {
		return nil
	}
	return s.cfg.TLS.Certs
}

// TLSFile returns the path of one of a TLS server's PEM files in its
// directory ("ca.crt", "client.crt", "client.key", "server.crt",
// "server.key"), or "" for a plain server.
func (s *Server) TLSFile(name string) string { return s.tlsFiles[name] }

// dial opens the harness's own connection to the server: plain TCP, or TLS
// with the client certificate on a TLS server.
func (s *Server) dial(timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if s.cfg.TLS == nil {
		return d.Dial("tcp", s.Addr())
	}
	return (&tls.Dialer{NetDialer: d, Config: s.cfg.TLS.Certs.ClientConfig(true)}).Dial("tcp", s.Addr())
}
