package main

import (
	"fmt"

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
	case "global weights":
		return newWeighted(f, o, modeFormula)
	case "global weights, balanced":
		return newWeighted(f, o, modeBalanced)
	case "per-node weights":
		return newWeighted(f, o, modePerNode)
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
