package main

// Quorum mode (several --redis, lease.NewQuorum): what is read from every
// node, and the majority's view of a name that status and list show.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"
)

// scanNames is scanNames over every Cluster primary (ForEachMaster) and
// every quorum node: the union of the names found.
func (cs *conns) scanNames(ctx context.Context, prefix, pattern string) ([]string, error) {
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	scan := func(ctx context.Context, c redis.UniversalClient) error {
		names, err := scanNames(ctx, c, prefix, pattern)
		mu.Lock()
		for _, n := range names {
			seen[n] = true
		}
		mu.Unlock()
		return err
	}
	errs := cs.each(ctx, func(ctx context.Context, _ int, c redis.UniversalClient) error {
		return scan(ctx, c) // on a Cluster, every primary's
	})
	if err := cs.enough(errs); err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// enough is nil when a majority of the nodes succeeded (every node, out
// of quorum mode), else the first error: a refusal before any other.
func (cs *conns) enough(errs []error) error {
	ok := 0
	var first error
	for i, err := range errs {
		if err == nil {
			ok++
			continue
		}
		if cs.quorum() {
			err = fmt.Errorf("%s: %w", cs.nodes[i].where, err)
		}
		if first == nil || (refusal(err) != "" && refusal(first) == "") {
			first = err
		}
	}
	if ok >= cs.majority() && (cs.quorum() || first == nil) {
		return nil
	}
	return first
}

// nodeView is one quorum node's view of a name, as status shows it.
type nodeView struct {
	Node   string `json:"node"`
	Kind   string `json:"kind,omitempty"`
	TTLms  int64  `json:"ttl_ms"`
	Fence  int64  `json:"fence"`
	Holder string `json:"holder,omitempty"`
	Error  string `json:"error,omitempty"`
}

func (v nodeView) text() string {
	if v.Error != "" {
		return fmt.Sprintf("%s: no answer: %s", v.Node, v.Error)
	}
	h := holding{Kind: v.Kind, TTLms: v.TTLms}
	s := fmt.Sprintf("%s: %s, ttl %s, fence %d", v.Node, v.Kind, h.ttl(), v.Fence)
	if v.Holder != "" {
		s += ", holder " + shown(v.Holder)
	}
	return s
}

// inspect reads names: out of quorum mode, as inspect does; in quorum
// mode from every node, each name then showing the majority's view (a
// lease whose token a majority holds: its largest fence and its shortest
// TTL; else free, with the largest fence of any node) and, in Nodes, each
// node's own.
func (cs *conns) inspect(ctx context.Context, prefix string, names []string) ([]holding, error) {
	if !cs.quorum() {
		return inspect(ctx, cs.one(), prefix, names)
	}
	views := make([][]holding, len(cs.nodes))
	errs := cs.each(ctx, func(ctx context.Context, i int, c redis.UniversalClient) error {
		hs, err := inspect(ctx, c, prefix, names)
		views[i] = hs
		return err
	})
	if err := cs.enough(errs); err != nil {
		return nil, err
	}
	out := make([]holding, len(names))
	for i, name := range names {
		counts := map[string]int{}
		for _, v := range views {
			if v != nil {
				counts[v[i].agreement()]++
			}
		}
		agreed := ""
		for k, c := range counts {
			if c >= cs.majority() {
				agreed = k
			}
		}
		h := holding{Name: name, Kind: "free"}
		var agreeing []holding
		for j, v := range views {
			if v == nil {
				h.Nodes = append(h.Nodes, nodeView{Node: cs.nodes[j].where, Error: oneLine(errs[j].Error())})
				continue
			}
			nh := v[i]
			h.Nodes = append(h.Nodes, nodeView{Node: cs.nodes[j].where, Kind: nh.Kind, TTLms: nh.TTLms, Fence: nh.Fence, Holder: nh.Holder})
			h.Fence = max(h.Fence, nh.Fence)
			if agreed != "" && agreed != "free" && nh.agreement() == agreed {
				agreeing = append(agreeing, nh)
			}
		}
		if len(agreeing) > 0 {
			nodes := h.Nodes
			h = agreeing[0]
			h.Nodes = nodes
			for _, a := range agreeing[1:] {
				h.Fence = max(h.Fence, a.Fence)
				if a.TTLms >= 0 && (h.TTLms < 0 || a.TTLms < h.TTLms) {
					h.TTLms = a.TTLms
				}
			}
		}
		out[i] = h
	}
	return out, nil
}

// agreement is what quorum nodes must share to hold a name alike: its kind
// and, for a lease, its token.
func (h holding) agreement() string {
	if h.Kind == "lease" {
		return "lease\x00" + h.id
	}
	return h.Kind
}
