package main

// Parsing --redis values (target.go).

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in                   string
		kind, master         string
		addrs                []string
		db                   int
		user, password       string
		tls                  bool
		singleAddr, errMatch string
	}{
		{in: "redis-sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster", kind: kindSentinel, master: "mymaster",
			addrs: []string{"127.0.0.1:26379", "127.0.0.1:26380"}},
		{in: "rediss-sentinel://u:p%40ss@h1:1/m?db=3", kind: kindSentinel, master: "m", addrs: []string{"h1:1"}, db: 3,
			user: "u", password: "p@ss", tls: true},
		{in: "redis-cluster://:pw@[::1]:7000,127.0.0.1:7001", kind: kindCluster, addrs: []string{"[::1]:7000", "127.0.0.1:7001"}, password: "pw"},
		{in: "rediss-cluster://u:pw@h:7000/", kind: kindCluster, addrs: []string{"h:7000"}, user: "u", password: "pw", tls: true},
		{in: "redis://u:pw@h:6379/2", kind: kindServer, user: "u", password: "pw", singleAddr: "h:6379"},
		{in: "h:6379", kind: kindServer, singleAddr: "h:6379"},
		// No master name parses: the sentinels are asked which they
		// monitor, for the message (sentinelWrongURLs).
		{in: "redis-sentinel://h:1", kind: kindSentinel, addrs: []string{"h:1"}},
		{in: "redis-sentinel://h:1/m/x", errMatch: "the path must be the master name"},
		{in: "redis-sentinel://h:1/m?db=x", errMatch: `db="x" is no database number`},
		{in: "redis-sentinel://h:1/m?dial_timeout=1", errMatch: "the only query parameter is db=N"},
		{in: "redis-cluster://h:1/2", errMatch: "a Cluster URL takes no path"},
		{in: "redis-cluster://h:1,h/", errMatch: `"h" is not host:port`},
		{in: "redis-cluster://h:1,,h:2", errMatch: `"" is not host:port`},
		{in: "redis-cluster://h:99999", errMatch: "no port from 1 to 65535"},
		{in: "redis-cluster://", errMatch: "is not host:port"},
		{in: "redis-cluster://u:secret%zz@h:1", errMatch: "not shown: it has user information"},
		{in: "redis-cluster://u:secretpw@h", errMatch: "not shown: it has user information"},
	} {
		got, err := parseTarget(tc.in)
		if tc.errMatch != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errMatch) {
				t.Errorf("parseTarget(%q): error %v, want one with %q", tc.in, err, tc.errMatch)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("parseTarget(%q): the error shows the password: %v", tc.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseTarget(%q): %v", tc.in, err)
			continue
		}
		if got.kind != tc.kind || got.master != tc.master || got.db != tc.db || got.user != tc.user ||
			got.password != tc.password || (got.tls != nil) != tc.tls || fmt.Sprint(got.addrs) != fmt.Sprint(tc.addrs) {
			t.Errorf("parseTarget(%q) = %+v", tc.in, got)
		}
		if tc.singleAddr != "" && got.opts.Addr != tc.singleAddr {
			t.Errorf("parseTarget(%q): address %q", tc.in, got.opts.Addr)
		}
	}
}
