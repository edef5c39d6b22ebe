package main

import (
	"fmt"
	"time"

	"github.com/xds-server/xds-server/weights"
)

// service is the name the simulated service has in the tracker.
const service = "sim"

// policy decides how each client splits its rate over its subset.
type policy interface {
	// splits returns, by client, the current split over its subset
	// (aligned with the subset, summing to 1). The caller must not modify
	// it; it is valid until the next observe.
	splits() [][]float64
	// observe takes the reports at the end of an interval and sets the
	// splits of the next one.
	observe(obs observation) error
}

// policyNames are the policies in the order they are shown.
var policyNames = []string{"round robin", "least-loaded", "global weights", "global weights, balanced", "per-node weights"}

// newPolicy returns the named policy for fleet f, starting from round
// robin.
func newPolicy(name string, f fleet, o options) (policy, error) {
	switch name {
	case "round robin":
		return roundRobin{f.even()}, nil
	case "least-loaded":
		return &leastLoaded{f: f, split: f.even(), damping: o.damping}, nil
	case "global weights", "global weights, balanced":
		tr, err := newTracker(f)
		if err != nil {
			return nil, err
		}
		g := &global{f: f, tr: tr, split: f.even()}
		if name == "global weights, balanced" {
			g.nodes, g.subsets = clientSubsets(f)
		}
		return g, nil
	case "per-node weights":
		return newPerNode(f)
	}
	return nil, fmt.Errorf("weightsim: unknown policy %q", name)
}

// roundRobin: every client splits its rate evenly over its subset.
type roundRobin struct{ split [][]float64 }

func (r roundRobin) splits() [][]float64       { return r.split }
func (r roundRobin) observe(observation) error { return nil }

// leastLoaded: each client alone, from last interval's utilization of the
// members of its own subset (as backends report it to their clients, e.g.
// ORCA per call), moves damping of the way toward the split that shifts
// its load from the members above its average to those below: new share
// proportional to share / utilization. It knows nothing of other clients.
type leastLoaded struct {
	f       fleet
	split   [][]float64
	damping float64
}

func (l *leastLoaded) splits() [][]float64 { return l.split }

func (l *leastLoaded) observe(obs observation) error {
	for i, sub := range l.f.subsets {
		x := l.split[i]
		target := make([]float64, len(sub))
		for t, j := range sub {
			target[t] = x[t] / max(obs.util[j], 1e-3)
		}
		normalize(target)
		for t := range x {
			x[t] += l.damping * (target[t] - x[t])
		}
		normalize(x)
	}
	return nil
}

// newTracker returns a tracker with the default config, told the fleet's
// backends.
func newTracker(f fleet) (*weights.Tracker, error) {
	tr, err := weights.NewTracker(weights.DefaultConfig())
	if err != nil {
		return nil, fmt.Errorf("weightsim: %w", err)
	}
	eps := make([]weights.Endpoint, len(f.ids))
	for j, id := range f.ids {
		eps[j] = weights.Endpoint{ID: id}
	}
	if err := tr.SetEndpoints(service, eps); err != nil {
		return nil, fmt.Errorf("weightsim: %w", err)
	}
	return tr, nil
}

// observeBackends feeds the tracker every backend's report (ORCA: its
// total qps and CPU utilization).
func observeBackends(tr *weights.Tracker, f fleet, obs observation) error {
	for j, id := range f.ids {
		r := weights.Report{Service: service, Endpoint: id, At: obs.at, QPS: obs.qps[j], CPU: obs.util[j]}
		if err := tr.Observe(r, obs.at); err != nil {
			return fmt.Errorf("weightsim: %w", err)
		}
	}
	return nil
}

// global: one integer weight per backend from the tracker's table, pushed
// to every client when weights.Changed says so (5% share change, as the
// runner does); each client splits in proportion to its members' weights.
// Balanced (subsets set), the tracker is also fed every client's rates
// (LRS) and the table goes through weights.BalanceService first, as the
// runner does with weights.balance on.
type global struct {
	f       fleet
	tr      *weights.Tracker
	pushed  weights.Table
	sent    bool
	split   [][]float64
	nodes   []string            // by client; nil unless balanced
	subsets map[string][]string // node -> endpoint ids; nil unless balanced
}

// clientSubsets names the clients and lists their subsets by endpoint id.
func clientSubsets(f fleet) ([]string, map[string][]string) {
	nodes := make([]string, len(f.subsets))
	subs := make(map[string][]string, len(f.subsets))
	for i, sub := range f.subsets {
		nodes[i] = fmt.Sprintf("node-%d", i)
		for _, j := range sub {
			subs[nodes[i]] = append(subs[nodes[i]], f.ids[j])
		}
	}
	return nodes, subs
}

func (g *global) splits() [][]float64 { return g.split }

func (g *global) observe(obs observation) error {
	if err := observeBackends(g.tr, g.f, obs); err != nil {
		return err
	}
	if g.nodes != nil {
		if err := observeClients(g.tr, g.f, g.nodes, obs); err != nil {
			return err
		}
	}
	tab := g.tr.Update(obs.at)
	if g.nodes != nil {
		if err := g.balance(&tab); err != nil {
			return err
		}
	}
	if g.sent && !weights.Changed(g.pushed, tab, weights.DefaultMinChange) {
		return nil
	}
	g.pushed, g.sent = tab, true
	svc, ok := tab.Service(service)
	if !ok {
		return fmt.Errorf("weightsim: service %q missing from the weight table", service)
	}
	w := make([]float64, len(g.f.ids))
	for j, id := range g.f.ids {
		row, ok := svc.Row(id)
		if !ok {
			return fmt.Errorf("weightsim: endpoint %q missing from the weight table", id)
		}
		w[j] = float64(row.Weight)
	}
	for i, sub := range g.f.subsets {
		for t, j := range sub {
			g.split[i][t] = w[j]
		}
		normalize(g.split[i])
	}
	return nil
}

// perNode: the tracker is fed the backends' reports and every client's
// per-endpoint rates (LRS); weights.Solve on weights.NewProblem gives each
// client its own integer weights, damped (the solver's default) from the
// weights last sent, which start as round robin (all 1).
type perNode struct {
	f     fleet
	tr    *weights.Tracker
	nodes []string
	subs  map[string][]string // node -> endpoint ids
	prev  [][]float64         // weights last sent, by client
	split [][]float64
}

func newPerNode(f fleet) (*perNode, error) {
	tr, err := newTracker(f)
	if err != nil {
		return nil, err
	}
	p := &perNode{f: f, tr: tr, prev: make([][]float64, len(f.subsets)), split: f.even()}
	p.nodes, p.subs = clientSubsets(f)
	for i, sub := range f.subsets {
		for range sub {
			p.prev[i] = append(p.prev[i], 1)
		}
	}
	return p, nil
}

func (p *perNode) splits() [][]float64 { return p.split }

func (p *perNode) observe(obs observation) error {
	if err := observeBackends(p.tr, p.f, obs); err != nil {
		return err
	}
	if err := observeClients(p.tr, p.f, p.nodes, obs); err != nil {
		return err
	}
	return p.solve(obs.at)
}

// observeClients feeds the tracker every client's rate to each member of
// its subset (LRS); nodes names the clients.
func observeClients(tr *weights.Tracker, f fleet, nodes []string, obs observation) error {
	for i, sub := range f.subsets {
		for t, j := range sub {
			r := weights.Report{Service: service, Endpoint: f.ids[j], Node: nodes[i], At: obs.at, QPS: obs.client[i][t]}
			if err := tr.Observe(r, obs.at); err != nil {
				return fmt.Errorf("weightsim: %w", err)
			}
		}
	}
	return nil
}

// balance replaces the service's table in tab by its balanced one.
func (g *global) balance(tab *weights.Table) error {
	for k, st := range tab.Services {
		if st.Name != service {
			continue
		}
		b, _, err := weights.BalanceService(st, g.subsets, g.tr.NodeRates(service, tab.At), weights.DefaultBalanceConfig())
		if err != nil {
			return fmt.Errorf("weightsim: balance: %w", err)
		}
		tab.Services[k] = b
	}
	return nil
}

// solve builds the problem from the tracker and applies the solution.
func (p *perNode) solve(now time.Time) error {
	tab := p.tr.Update(now)
	svc, ok := tab.Service(service)
	if !ok {
		return fmt.Errorf("weightsim: service %q missing from the weight table", service)
	}
	rates := p.tr.NodeRates(service, now)
	nodes := make([]weights.NodeLoad, len(p.nodes))
	for i, id := range p.nodes {
		nodes[i] = weights.NodeLoad{Node: id, Subset: p.subs[id], Rates: rates[id], Previous: p.prev[i]}
	}
	sol, err := weights.Solve(weights.NewProblem(svc, nodes), weights.DefaultSolveConfig())
	if err != nil {
		return fmt.Errorf("weightsim: solve: %w", err)
	}
	for i, nw := range sol.Nodes {
		for t, w := range nw.Weights {
			p.prev[i][t] = float64(w)
			p.split[i][t] = float64(w)
		}
		normalize(p.split[i])
	}
	return nil
}
