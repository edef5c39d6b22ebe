package main

import (
	"github.com/xds-server/xds-server/console"
	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/drain"
	"github.com/xds-server/xds-server/weights"
	"github.com/xds-server/xds-server/xds"
)

// fanOut carries snapshots where the components do not form a line:
//
//   - each snapshot the drain overlay emits (discovery's, through the
//     removal guard and the drains) goes to the change log, the weights
//     pipeline, the xDS server and the console, in that order (Observe);
//   - each ORCA report goes back to the drain overlay as its endpoint's
//     lame-duck state (orca);
//   - each node subsets view the xDS server publishes goes to the weights
//     pipeline (subsets).
//
// Its readers are set while serve wires the components, because two of
// them are built after the drain overlay that emits to them (the console
// shows the drains; the weights pipeline's ORCA reports reach the drains):
// all are set before discovery starts, and nothing flows before then.
type fanOut struct {
	changes *discovery.ChangeLog // health and drain transitions, per service per update
	weights *weights.Pipeline
	xds     *xds.Server
	console *console.Console
	drains  *drain.Manager
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

// orca is the weights pipeline's ORCA sink of drain.orca_metric metric: a
// report with the metric at 1 or more marks its endpoint lame duck.
func (f *fanOut) orca(metric string) func(weights.Report) {
	return func(r weights.Report) { f.drains.SetORCA(r.Service, r.Endpoint, r.Named[metric] >= 1) }
}
