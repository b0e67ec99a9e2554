package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// SentinelMasterName is the name the sentinels monitor the primary
	// under.
	SentinelMasterName = "mymaster"

	// SentinelDownAfter is down-after-milliseconds: how long a primary
	// must be unreachable (e.g. paused) before sentinels consider it down.
	SentinelDownAfter = time.Second

	// SentinelFailoverTimeout is failover-timeout. Sentinel also waits this
	// long before demoting a returning old primary, and twice this long
	// before retrying a failover of the same primary, so it is kept small.
	SentinelFailoverTimeout = 4 * time.Second

	failoverWait = 30 * time.Second
)

// Sentinel is a primary with replicas and a group of sentinels watching it,
// all real processes from the same redis-server binary on 127.0.0.1.
type Sentinel struct {
	servers   []*Server // data servers; servers[0] started as the primary
	sentinels []*Server
	certs     *Certs // nil unless every process is TLS-only

	mu      sync.Mutex
	primary *Server // last primary a sentinel reported
}

// StartSentinel starts one primary and `replicas` replicas (attached with
// REPLICAOF), then `sentinels` sentinels (redis-server <conf> --sentinel)
// monitoring the primary as SentinelMasterName with quorum
// sentinels/2+1, SentinelDownAfter and SentinelFailoverTimeout. It returns once
// every sentinel reports the primary, all replicas as healthy, and all other
// sentinels. The caller must call Stop.
func StartSentinel(replicas, sentinels int) (*Sentinel, error) {
	return StartSentinelConfig(Config{}, replicas, sentinels)
}

// StartSentinelConfig is StartSentinel with cfg for every data server. With
// cfg.TLS the data servers and the sentinels are all TLS-only, sharing one
// Certs (fresh ones when cfg.TLS.Certs is nil); replication and the
// sentinels' links run over TLS (tls-replication), and FailoverOptions
// carries the TLS configuration, which go-redis uses for the sentinels and
// the data servers alike. The sentinels get cfg.TLS only, not AOF or Args.
func StartSentinelConfig(cfg Config, replicas, sentinels int) (*Sentinel, error) {
	if replicas < 0 || sentinels < 1 {
		return nil, fmt.Errorf("redistest: StartSentinel(%d, %d): need at least one sentinel and no negative replica count", replicas, sentinels)
	}
	cfg, err := shareCerts(cfg)
	if err != nil {
		return nil, err
	}
	servers, err := startMany(1+replicas, func(int) (*Server, error) { return StartServer(cfg) })
	if err != nil {
		return nil, err
	}
	s := &Sentinel{servers: servers, primary: servers[0]}
	if cfg.TLS != nil {
		s.certs = cfg.TLS.Certs
	}
	if err := s.attachReplicas(); err != nil {
		err = fmt.Errorf("redistest: attaching replicas: %w%s", err, logTails(servers))
		_ = s.Stop()
		return nil, err
	}
	// Sentinels start only once the replicas are attached: a sentinel
	// learns about replicas from the primary's INFO, which it polls only
	// every 10 seconds after the first one.
	p := servers[0]
	conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d\n", SentinelMasterName, p.Port(), sentinels/2+1) +
		fmt.Sprintf("sentinel down-after-milliseconds %s %d\n", SentinelMasterName, SentinelDownAfter.Milliseconds()) +
		fmt.Sprintf("sentinel failover-timeout %s %d\n", SentinelMasterName, SentinelFailoverTimeout.Milliseconds()) +
		fmt.Sprintf("sentinel parallel-syncs %s 1\n", SentinelMasterName)
	s.sentinels, err = startMany(sentinels, func(int) (*Server, error) {
		return startServer(Config{TLS: cfg.TLS}, kindSentinel, conf)
	})
	if err != nil {
		_ = s.Stop()
		return nil, err
	}
	if err := s.waitSentinels(); err != nil {
		err = fmt.Errorf("redistest: sentinels did not settle: %w%s", err, logTails(append(s.Servers(), s.sentinels...)))
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// NewSentinel is StartSentinel for tests: it fails the test (never skips) on
// error and stops everything in tb.Cleanup.
func NewSentinel(tb testing.TB, replicas, sentinels int) *Sentinel {
	tb.Helper()
	return NewSentinelConfig(tb, Config{}, replicas, sentinels)
}

// NewSentinelConfig is StartSentinelConfig for tests, as NewSentinel is
// StartSentinel's.
func NewSentinelConfig(tb testing.TB, cfg Config, replicas, sentinels int) *Sentinel {
	tb.Helper()
	if _, err := Binary(); err != nil {
		tb.Fatal(err)
	}
	s, err := StartSentinelConfig(cfg, replicas, sentinels)
	if err != nil {
		tb.Fatal(err)
	}
	cleanupGroup(tb, "sentinel group", s.Stop, append(s.Servers(), s.sentinels...)...)
	return s
}

// MasterName returns SentinelMasterName.
func (s *Sentinel) MasterName() string { return SentinelMasterName }

// SentinelAddrs returns the sentinels' addresses.
func (s *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.sentinels))
	for i, srv := range s.sentinels {
		addrs[i] = srv.Addr()
	}
	return addrs
}

// Sentinels returns the sentinel processes, e.g. to pause or kill one.
func (s *Sentinel) Sentinels() []*Server { return append([]*Server(nil), s.sentinels...) }

// Servers returns all data servers (primary and replicas); the first one was
// the primary at start.
func (s *Sentinel) Servers() []*Server { return append([]*Server(nil), s.servers...) }

// Primary returns the current primary as the sentinels report it: the first
// sentinel that is running, not paused and answers within a second decides.
// If none answers it returns the last primary a sentinel reported.
func (s *Sentinel) Primary() *Server {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, srv := range s.sentinels {
		if !srv.Running() || srv.Paused() {
			continue
		}
		addr, err := s.masterAddr(ctx, srv)
		if err != nil {
			continue
		}
		if p := s.server(addr); p != nil {
			s.mu.Lock()
			s.primary = p
			s.mu.Unlock()
			return p
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.primary
}

// Replicas returns the data servers other than Primary(). Right after a
// failover the old primary is among them although Sentinel demotes it only
// after SentinelFailoverTimeout and its next INFO poll.
func (s *Sentinel) Replicas() []*Server {
	p := s.Primary()
	var out []*Server
	for _, srv := range s.servers {
		if srv != p {
			out = append(out, srv)
		}
	}
	return out
}

// Certs returns the certificates of a TLS group, nil for a plain one.
func (s *Sentinel) Certs() *Certs { return s.certs }

// FailoverOptions returns go-redis failover options for this group, with
// ContextTimeoutEnabled and a short DialTimeout; in a TLS group, TLS that
// trusts its authority and presents the client certificate.
func (s *Sentinel) FailoverOptions() *redis.FailoverOptions {
	o := &redis.FailoverOptions{
		MasterName:            SentinelMasterName,
		SentinelAddrs:         s.SentinelAddrs(),
		ContextTimeoutEnabled: true,
		DialTimeout:           2 * time.Second,
	}
	if s.certs != nil {
		o.TLSConfig = s.certs.ClientConfig(true)
	}
	return o
}

// NewFailoverClient returns a redis.NewFailoverClient for this group; the
// caller closes it.
func (s *Sentinel) NewFailoverClient() *redis.Client {
	return redis.NewFailoverClient(s.FailoverOptions())
}

// FailoverClient returns a redis.NewFailoverClient for this group, closed in
// tb.Cleanup.
func (s *Sentinel) FailoverClient(tb testing.TB) *redis.Client {
	tb.Helper()
	c := s.NewFailoverClient()
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Failover runs SENTINEL FAILOVER and waits until every responsive sentinel
// reports a different primary and that primary accepts writes. The old
// primary keeps running; Sentinel demotes it to a replica asynchronously.
func (s *Sentinel) Failover() error {
	ctx, cancel := context.WithTimeout(context.Background(), failoverWait)
	defer cancel()
	old := s.Primary()
	if old == nil {
		return errors.New("redistest: no known primary")
	}
	err := poll(ctx, func() error {
		var errs []error
		for _, srv := range s.liveSentinels() {
			c := redis.NewSentinelClient(sentinelOptions(srv))
			err := c.Failover(ctx, SentinelMasterName).Err()
			_ = c.Close()
			if err == nil {
				return nil
			}
			// INPROG or NOGOODSLAVE: another failover is running or
			// the sentinel has no fresh replica yet; try again.
			errs = append(errs, fmt.Errorf("%s: %w", srv.Addr(), err))
		}
		if len(errs) == 0 {
			return errors.New("no responsive sentinel")
		}
		return errors.Join(errs...)
	})
	if err != nil {
		return fmt.Errorf("redistest: SENTINEL FAILOVER: %w", err)
	}
	var next *Server
	err = poll(ctx, func() error {
		next = nil
		for _, srv := range s.liveSentinels() {
			addr, err := s.masterAddr(ctx, srv)
			if err != nil {
				return fmt.Errorf("%s: %w", srv.Addr(), err)
			}
			p := s.server(addr)
			switch {
			case p == nil:
				return fmt.Errorf("%s reports unknown primary %s", srv.Addr(), addr)
			case p == old:
				return fmt.Errorf("%s still reports %s", srv.Addr(), addr)
			case next != nil && p != next:
				return fmt.Errorf("sentinels disagree: %s and %s", next.Addr(), p.Addr())
			}
			next = p
		}
		if next == nil {
			return errors.New("no responsive sentinel")
		}
		return acceptsWrites(ctx, next)
	})
	if err != nil {
		return fmt.Errorf("redistest: waiting for failover from %s: %w", old.Addr(), err)
	}
	s.mu.Lock()
	s.primary = next
	s.mu.Unlock()
	return nil
}

// Stop stops the sentinels, then the data servers; it is idempotent.
func (s *Sentinel) Stop() error {
	// Sentinels first, so they do not react to the servers going away.
	err := stopAll(s.sentinels)
	return errors.Join(err, stopAll(s.servers))
}

func (s *Sentinel) attachReplicas() error {
	ctx, cancel := context.WithTimeout(context.Background(), groupReadyTimeout)
	defer cancel()
	p := s.servers[0]
	clients := make([]*redis.Client, len(s.servers))
	for i, srv := range s.servers {
		clients[i] = srv.NewClient()
	}
	defer closeAll(clients)
	for i := 1; i < len(s.servers); i++ {
		if err := clients[i].ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(p.Port())).Err(); err != nil {
			return fmt.Errorf("REPLICAOF on %s: %w", s.servers[i].Addr(), err)
		}
		// Persist the role in the config file, as Sentinel does after
		// its own reconfigurations, so a Restart comes back as a replica
		// instead of an empty primary.
		if err := clients[i].ConfigRewrite(ctx).Err(); err != nil {
			return fmt.Errorf("CONFIG REWRITE on %s: %w", s.servers[i].Addr(), err)
		}
	}
	want := len(s.servers) - 1
	return poll(ctx, func() error {
		info, err := clients[0].Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if n := strings.Count(info, ",state=online,"); n != want {
			return fmt.Errorf("primary has %d of %d replicas online", n, want)
		}
		for i := 1; i < len(clients); i++ {
			if err := replicaLinkUp(ctx, clients[i]); err != nil {
				return fmt.Errorf("%s: %w", s.servers[i].Addr(), err)
			}
		}
		return nil
	})
}

func (s *Sentinel) waitSentinels() error {
	ctx, cancel := context.WithTimeout(context.Background(), groupReadyTimeout)
	defer cancel()
	clients := make([]*redis.SentinelClient, len(s.sentinels))
	for i, srv := range s.sentinels {
		clients[i] = redis.NewSentinelClient(sentinelOptions(srv))
	}
	defer closeAll(clients)
	primary := s.servers[0].Addr()
	return poll(ctx, func() error {
		for i, c := range clients {
			who := s.sentinels[i].Addr()
			addr, err := c.GetMasterAddrByName(ctx, SentinelMasterName).Result()
			if err != nil {
				return fmt.Errorf("%s: %w", who, err)
			}
			if len(addr) != 2 || net.JoinHostPort(addr[0], addr[1]) != primary {
				return fmt.Errorf("%s reports primary %v", who, addr)
			}
			reps, err := c.Replicas(ctx, SentinelMasterName).Result()
			if err != nil {
				return fmt.Errorf("%s: %w", who, err)
			}
			healthy := 0
			for _, r := range reps {
				if r["flags"] == "slave" && r["master-link-status"] == "ok" {
					healthy++
				}
			}
			if healthy != len(s.servers)-1 {
				return fmt.Errorf("%s knows %d of %d healthy replicas", who, healthy, len(s.servers)-1)
			}
			peers, err := c.Sentinels(ctx, SentinelMasterName).Result()
			if err != nil {
				return fmt.Errorf("%s: %w", who, err)
			}
			if len(peers) != len(s.sentinels)-1 {
				return fmt.Errorf("%s knows %d of %d other sentinels", who, len(peers), len(s.sentinels)-1)
			}
		}
		return nil
	})
}

// liveSentinels are the sentinels that can be expected to answer.
func (s *Sentinel) liveSentinels() []*Server {
	var out []*Server
	for _, srv := range s.sentinels {
		if srv.Running() && !srv.Paused() {
			out = append(out, srv)
		}
	}
	return out
}

func (s *Sentinel) masterAddr(ctx context.Context, srv *Server) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c := redis.NewSentinelClient(sentinelOptions(srv))
	defer c.Close()
	addr, err := c.GetMasterAddrByName(ctx, SentinelMasterName).Result()
	if err != nil {
		return "", err
	}
	if len(addr) != 2 {
		return "", fmt.Errorf("unexpected reply %v", addr)
	}
	return net.JoinHostPort(addr[0], addr[1]), nil
}

// server maps an address to one of the group's data servers.
func (s *Sentinel) server(addr string) *Server {
	for _, srv := range s.servers {
		if srv.Addr() == addr {
			return srv
		}
	}
	return nil
}

func sentinelOptions(srv *Server) *redis.Options {
	o := srv.Options()
	o.MaxRetries = -1 // control-plane calls are polled anyway
	return o
}

// acceptsWrites checks srv is a primary that takes a write. The probe key is
// set and deleted in one MULTI/EXEC, so no client ever observes it.
func acceptsWrites(ctx context.Context, srv *Server) error {
	c := srv.NewClient()
	defer c.Close()
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "redistest:failover-probe", "1", 0)
		p.Del(ctx, "redistest:failover-probe")
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s does not accept writes yet: %w", srv.Addr(), err)
	}
	return nil
}
