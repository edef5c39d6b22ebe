package weights

import "sync/atomic"

// Subsets is which endpoints each node is given, as of one reconcile pass
// of the xDS server: the pipeline's view of the fleet. It is fed to the
// pipeline (SetSubsets) by whoever computes subsets (xds.SubsetsView
// satisfies it; cmd wires the two), never asked for: nothing in weights
// calls the xDS server. A Subsets does not change once handed over.
type Subsets interface {
	// Version increases with every view the producer publishes.
	Version() uint64
	// NodeSubsets returns, for every known node, the ids of the serving
	// endpoints of service it is given, sorted; nodes without a client
	// index are left out of a subset service; nil if the service is
	// unknown. The result is shared: callers must not modify it.
	NodeSubsets(service string) map[string][]string
}

// SubsetsMap is a fixed Subsets: service -> node -> endpoint ids (tests,
// fleets without an xDS server); its Version is 0.
type SubsetsMap map[string]map[string][]string

// Version is 0: a SubsetsMap is one fixed view.
func (m SubsetsMap) Version() uint64 { return 0 }

// NodeSubsets returns m[service].
func (m SubsetsMap) NodeSubsets(service string) map[string][]string { return m[service] }

// latestSubsets holds the view last fed; empty before the first.
type latestSubsets struct{ p atomic.Pointer[subsetsRef] }

type subsetsRef struct{ s Subsets }

// set replaces the view; it never blocks.
func (l *latestSubsets) set(s Subsets) { l.p.Store(&subsetsRef{s}) }

// get returns the latest view (an empty one before the first).
func (l *latestSubsets) get() Subsets {
	if r := l.p.Load(); r != nil && r.s != nil {
		return r.s
	}
	return SubsetsMap(nil)
}

// SetSubsets hands the pipeline the latest node subsets; every stage that
// needs them reads this view until the next. It never blocks (the xDS
// server calls it with its reconciler's lock held).
func (p *Pipeline) SetSubsets(s Subsets) { p.subsets.set(s) }
