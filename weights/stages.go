package weights

import (
	"context"
	"slices"
	"time"
)

// The pipeline's stages, in order:
//
//   - ingest (event-driven: Observe for discovery snapshots, the report
//     sinks for ORCA, LRS and the push API): the tracker learns endpoints
//     and reports, and ORCA reports' LameDuck their transitions;
//   - HA merge (haMerge, with ha.enabled; ha.go): this replica's summary
//     out, every replica's into the merged tracker, the leader's table
//     served;
//   - track (Runner.Track): the tracker's table at now (the merged one
//     with HA);
//   - solve (solve): global balancing over the nodes' subsets and rates;
//   - spill (spillStage.step, spill_stage.go): each zone's share kept of
//     its own nodes' requests, for the services with spill on, shown in
//     the table's Zones and handed to a SpillPublisher when it moved;
//   - publish (Runner.Offer, then the lame-duck transitions): the push
//     policy hands the table to the xDS server (with HA the leader hands
//     it to the store) and plans per-node weights (publishNodes).
//
// Step runs one pass of them on the node subsets last fed (SetSubsets);
// Run runs Step every UpdatePeriod and delivers lame-duck transitions as
// soon as they are reported.

// Run runs Step every UpdatePeriod, and delivers lame-duck transitions as
// they come, until ctx is done; then it stops the ORCA streams.
func (p *Pipeline) Run(ctx context.Context) {
	defer p.orca.Close()
	t := time.NewTicker(p.runner.cfg.UpdatePeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			p.Step(now)
		case <-p.lame.kick:
			p.lame.publish()
		}
	}
}

// Step runs the stages once at now and reports whether weights were
// published (the push policy's verdict).
func (p *Pipeline) Step(now time.Time) bool {
	view := p.subsets.get()
	if p.ha != nil {
		p.haMerge(now, view)
	}
	t := p.runner.Track(now)
	t = p.solve(t, view)
	t = p.spill.step(t)
	published := p.runner.Offer(now, t)
	p.lame.publish()
	return published
}

// solve rewrites, with Balance set, the table of every weighted service
// in global mode by BalanceService over its nodes' subsets in view and
// their LRS rates (services no node reports on keep the formula's
// weights).
func (p *Pipeline) solve(t Table, view Subsets) Table {
	if p.cfg.Balance == nil {
		return t
	}
	p.mu.Lock()
	global := map[string]bool{}
	for name, perNode := range p.perSvc {
		global[name] = !perNode
	}
	p.mu.Unlock()
	out := t
	out.Services = slices.Clone(t.Services)
	for k, st := range out.Services {
		if !global[st.Name] {
			continue
		}
		subsets, rates := p.fleet(st.Name, t.At, view)
		b, ok, err := BalanceService(st, subsets, rates, *p.cfg.Balance)
		if err != nil {
			p.log.Error("weights: balancing failed; the formula's weights stay", "service", st.Name, "error", err)
			continue
		}
		if ok {
			out.Services[k] = b
		}
	}
	return out
}

// fleet returns what balancing a service sees: in HA mode the pseudo
// nodes of every replica's summary and their rates in the merged tracker,
// else this replica's nodes in view and their rates.
func (p *Pipeline) fleet(service string, at time.Time, view Subsets) (map[string][]string, map[string]map[string]float64) {
	if p.ha != nil {
		return p.ha.fleet(service, at)
	}
	return view.NodeSubsets(service), p.tracker.NodeRates(service, at)
}
