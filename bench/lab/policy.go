package main

import (
	"fmt"
	"strings"
)

// policy is one balancing policy the lab runs.
type policy struct {
	name    string // as in the table and the JSON
	sim     string // weightsim's name of the same policy
	weights bool   // EDS weights from reports; false: round robin
	mode    string // global or per_node
	balance bool   // weights.balance (global mode with LRS)
	subset  int    // subset_size; 0: every backend
}

// Policy names, as the issue lists them.
const (
	roundRobin = "round robin"
	formula    = "global, formula"
	balanced   = "global, balanced"
	perNode    = "per-node"
)

// policies are the runs of the lab on one fleet: every policy with
// subsets of o.subset, then (unless o.noFull) round robin and the formula
// with every backend in every client's set (per-node and balanced weights
// there are the formula's: every node has the same set).
func policies(o options) []policy {
	ps := []policy{
		{name: roundRobin, sim: "round robin", subset: o.subset},
		{name: formula, sim: "global weights", weights: true, mode: "global", subset: o.subset},
		{name: balanced, sim: "global weights, balanced", weights: true, mode: "global", balance: true, subset: o.subset},
		{name: perNode, sim: "per-node weights", weights: true, mode: "per_node", subset: o.subset},
	}
	if !o.noFull && o.subset < o.backends {
		ps = append(ps,
			policy{name: roundRobin, sim: "round robin"},
			policy{name: formula, sim: "global weights", weights: true, mode: "global"})
	}
	return ps
}

// label names a run: the policy and its subsets.
func (p policy) label(backends int) string {
	if p.subset == 0 || p.subset >= backends {
		return p.name + ", no subsets"
	}
	return fmt.Sprintf("%s, subsets of %d", p.name, p.subset)
}

// slug is a file name for the run's chart.
func (p policy) slug() string {
	s := strings.NewReplacer(", ", "-", " ", "-").Replace(p.name)
	if p.subset == 0 {
		return s + "-all"
	}
	return fmt.Sprintf("%s-subset%d", s, p.subset)
}

// serverConfig is xds-server's YAML for the run: Consul discovery of the
// lab service, client indices from the nodes' metadata (so that client i
// has the simulator's subset i), ring_hash (grpc-go honours endpoint
// weights only there; no hash policy: a random hash per request) or
// round_robin with weights off, and extra weights settings (o.fast); with
// Envoys (o.kind), the service over gRPC and the Envoys' listener.
func (p policy) serverConfig(consul string, o options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "discovery:\n  source: consul\n  consul: { address: %q, services: [%s] }\n", consul, service)
	b.WriteString("subsetting: { index_source: metadata }\n")
	fmt.Fprintf(&b, "services:\n  %s:\n    subset_size: %d\n", service, p.subset)
	if o.kind == envoyClients {
		b.WriteString(envoyServiceConfig)
	}
	if !p.weights {
		b.WriteString("    lb_policy: round_robin\n")
	} else {
		b.WriteString("    lb_policy: ring_hash\n")
		fmt.Fprintf(&b, "    ring_hash: { minimum_ring_size: %d, maximum_ring_size: %d }\n", o.ringSize, o.ringSize)
		fmt.Fprintf(&b, "    weights: { enabled: true, mode: %s, sources: [orca, lrs] }\n", p.mode)
	}
	fmt.Fprintf(&b, "weights: { balance: %t", p.balance)
	if o.fast {
		b.WriteString(", blackout_period: 2s, min_push_interval: 2s")
	}
	b.WriteString(" }\n")
	if o.kind == envoyClients {
		b.WriteString(envoyListenerConfig)
	}
	return b.String()
}
