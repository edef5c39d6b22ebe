package main

import (
	"github.com/xds-server/xds-server/console"
	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/weights"
	"github.com/xds-server/xds-server/xds"
)

// fanOut carries what flows between components built apart:
//
//   - each snapshot the drain overlay emits (discovery's, through the
//     removal guard and the drains) goes to the change log, the weights
//     pipeline, the xDS server and the console, in that order (Observe);
//   - each node subsets view the xDS server publishes goes to the weights
//     pipeline (subsets).
//
// Its readers are set while serve wires the components, because some of
// them are built after the components that emit to them (the console
// shows the drains; the xDS server is built before the pipeline it
// feeds): all are set before discovery starts, and nothing flows before
// then. ORCA's lame-duck transitions do not pass here: the drains
// subscribe to the pipeline (weights.Pipeline.SubscribeLameDuck).
type fanOut struct {
	changes *discovery.ChangeLog // health and drain transitions, per service per update
	weights *weights.Pipeline
	xds     *xds.Server
	console *console.Console
}

// Observe hands a served snapshot to every reader.
func (f *fanOut) Observe(snap discovery.Snapshot) {
	f.changes.Observe(snap)
	f.weights.Observe(snap)
	f.xds.Update(snap)
	f.console.Observe(snap)
}

// subsets feeds the xDS server's node subsets to the weights pipeline
// (xds.Config.OnSubsets); views only exist once discovery has started.
func (f *fanOut) subsets(v *xds.SubsetsView) { f.weights.SetSubsets(v) }
