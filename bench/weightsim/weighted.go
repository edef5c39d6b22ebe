package main

import (
	"fmt"
	"time"

	"github.com/xds-server/xds-server/weights"
)

// weightMode is how a weighted policy turns the tracker's table into
// splits.
type weightMode uint8

const (
	modeFormula  weightMode = iota // the formula's global weights (backend reports only)
	modeBalanced                   // global weights balanced with the clients' rates (weights.BalanceService)
	modePerNode                    // each client its own weights (weights.PerNode)
)

// weighted drives the product's own stages, weights.Runner's Track and
// Offer, once per report interval: the tracker (formula, smoothing,
// overload guard with its period), the push policy (weights.Changed at
// DefaultMinChange, at most one publication per MinPushInterval, 5s as
// xds-server's default weights.min_push_interval), and for the balanced
// and per-node policies the solve stage between them
// (weights.BalanceService) or the runner's PublishNodes
// (weights.PerNode.Plan). Clients split in proportion to the integer
// weights last published to them.
type weighted struct {
	f       fleet
	mode    weightMode
	tr      *weights.Tracker
	run     *weights.Runner
	solve   func(weights.Table) weights.Table // the solve stage (balanced), between Track and Offer; nil: none
	per     *weights.PerNode                  // modePerNode only
	nodes   []string                          // by client; nil for modeFormula
	subsets map[string][]string               // node -> endpoint ids; nil for modeFormula
	split   [][]float64
	err     error // of the last publication
}

// minPushInterval is xds-server's default weights.min_push_interval.
const minPushInterval = 5 * time.Second

func newWeighted(f fleet, o options, mode weightMode) (*weighted, error) {
	tr, err := newTracker(f)
	if err != nil {
		return nil, err
	}
	w := &weighted{f: f, mode: mode, tr: tr, split: f.even()}
	cfg := weights.RunnerConfig{Tracker: tr, Publish: w.publish, UpdatePeriod: o.interval,
		MinChange: weights.DefaultMinChange, MinPushInterval: minPushInterval}
	if mode != modeFormula {
		w.nodes, w.subsets = clientSubsets(f)
	}
	switch mode {
	case modeBalanced:
		w.solve = w.balance
	case modePerNode:
		if w.per, err = weights.NewPerNode(weights.DefaultSolveConfig(), weights.DefaultMinChange); err != nil {
			return nil, fmt.Errorf("weightsim: %w", err)
		}
		cfg.PublishNodes = w.publishNodes
	}
	if w.run, err = weights.NewRunner(cfg); err != nil {
		return nil, fmt.Errorf("weightsim: %w", err)
	}
	return w, nil
}

func (w *weighted) splits() [][]float64 { return w.split }

func (w *weighted) observe(obs observation) error {
	if err := observeBackends(w.tr, w.f, obs); err != nil {
		return err
	}
	if w.nodes != nil {
		if err := observeClients(w.tr, w.f, w.nodes, obs); err != nil {
			return err
		}
	}
	w.err = nil
	t := w.run.Track(obs.at)
	if w.solve != nil {
		t = w.solve(t)
	}
	w.run.Offer(obs.at, t)
	return w.err
}

// publish sets every client's split from the table's global weights (per
// node, PublishNodes then overrides the clients it planned).
func (w *weighted) publish(tab weights.Table) {
	svc, ok := tab.Service(service)
	if !ok {
		w.err = fmt.Errorf("weightsim: service %q missing from the weight table", service)
		return
	}
	for i, sub := range w.f.subsets {
		for t, j := range sub {
			row, ok := svc.Row(w.f.ids[j])
			if !ok {
				w.err = fmt.Errorf("weightsim: endpoint %q missing from the weight table", w.f.ids[j])
				return
			}
			w.split[i][t] = float64(row.Weight)
		}
		normalize(w.split[i])
	}
}

// publishNodes plans every client's own weights (weights.PerNode, damped
// from what it was last sent, kept unless some share moved by more than
// MinChange) and applies them; it reports whether some node's changed.
func (w *weighted) publishNodes(tab weights.Table) bool {
	svc, ok := tab.Service(service)
	if !ok {
		w.err = fmt.Errorf("weightsim: service %q missing from the weight table", service)
		return false
	}
	plan, changed, err := w.per.Plan(svc, w.subsets, w.tr.NodeRates(service, tab.At))
	if err != nil {
		w.err = fmt.Errorf("weightsim: per-node: %w", err)
		return false
	}
	for i, node := range w.nodes {
		nw, ok := plan[node]
		if !ok {
			continue // rate unknown: the global weights
		}
		for t, id := range w.subsets[node] {
			w.split[i][t] = float64(nw[id])
		}
		normalize(w.split[i])
	}
	return changed
}

// balance replaces the service's table by its balanced one (the runner's
// Adjust, as xds-server's pipeline does with weights.balance on).
func (w *weighted) balance(tab weights.Table) weights.Table {
	for k, st := range tab.Services {
		if st.Name != service {
			continue
		}
		b, _, err := weights.BalanceService(st, w.subsets, w.tr.NodeRates(service, tab.At), weights.DefaultBalanceConfig())
		if err != nil {
			w.err = fmt.Errorf("weightsim: balance: %w", err)
			return tab
		}
		tab.Services[k] = b
	}
	return tab
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
