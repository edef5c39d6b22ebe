package weights

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// SummaryExchange shares the replicas' summaries (ha.enabled); the ha
// package implements it over Consul KV.
type SummaryExchange interface {
	// PublishSummary hands this replica's latest summary over; the
	// exchange writes it at most every ha.publish_interval. It must not
	// block.
	PublishSummary(Summary)
	// Summaries returns the latest summary of every replica, as last seen.
	Summaries() []Summary
}

// SharedTable is the global weight table the weights leader writes and
// every replica serves.
type SharedTable struct {
	At      int64                        `json:"t"` // computed at, unix ms
	Weights map[string]map[string]uint32 `json:"w"` // service -> endpoint -> weight
}

// TableExchange is the weights leader's election and its table.
type TableExchange interface {
	// Leader reports whether this replica is the weights leader now.
	Leader() bool
	// WriteTable writes the table (the leader only); it must not block.
	WriteTable(SharedTable)
	// Table returns the table in the store as last seen and a sequence
	// that changes whenever a table is seen anew; false while the store
	// holds none (before the first, or after the store lost its state).
	Table() (SharedTable, uint64, bool)
}

// HAConfig shares the weights across replicas (ha.enabled): each replica
// publishes its Summary, keeps a merged tracker of every replica's
// summaries, and serves the leader's table; per_node services are solved
// locally over the merged table (the other replicas' load is background).
// ha.Weights is both exchanges (ha.Weights.PipelineHA builds this).
//
// The HA weights live here and in ha_summary.go (what a replica
// publishes), ha_merge.go (how summaries are merged) and ha/weights*.go
// (the exchange over Consul KV, its layout and the lead).
type HAConfig struct {
	Replica   string // this replica's id; required
	Summaries SummaryExchange
	Tables    TableExchange
}

// Validate reports what is missing.
func (c *HAConfig) Validate() error {
	if c == nil {
		return nil
	}
	var errs []error
	if c.Replica == "" {
		errs = append(errs, errors.New("weights: ha: no replica id"))
	}
	if c.Summaries == nil || c.Tables == nil {
		errs = append(errs, errors.New("weights: ha: no summary or table exchange"))
	}
	return errors.Join(errs...)
}

// haWeights is the Pipeline's HA part: the merged tracker (the runner's),
// the merger, and what this replica last built, led and served.
type haWeights struct {
	cfg    HAConfig
	log    *slog.Logger
	merged *Tracker // every replica's summaries; the runner's tracker
	merger *Merger

	mu      sync.Mutex
	subsets map[string]map[string][]string // service -> pseudo node -> subset
	served  uint64                         // sequence of the table last served
	servedT bool
	led     bool         // this replica led at the last step
	want    *SharedTable // the table handed over last while leading; nil: none since the lead was taken
	last    Summary      // last summary built
}

// newHAWeights returns the HA part for cfg, its merged tracker built with
// the pipeline's tracker config tc (already validated).
func newHAWeights(cfg HAConfig, tc Config, log *slog.Logger) (*haWeights, error) {
	merged, err := NewTracker(tc)
	if err != nil {
		return nil, fmt.Errorf("weights: ha: %w", err)
	}
	return &haWeights{cfg: cfg, log: log, merged: merged, merger: NewMerger()}, nil
}

// merge is the HA merge stage: it builds this replica's summary from its
// own tracker at now (over the nodes' subsets in view) and hands it over,
// and feeds every replica's latest summary (its own fresh) into the
// merged tracker.
func (h *haWeights) merge(now time.Time, own *Tracker, view Subsets) {
	own.Prune(now)
	mine := BuildSummary(h.cfg.Replica, now, own.Reports(now), view.NodeSubsets)
	h.cfg.Summaries.PublishSummary(mine)
	sums := []Summary{mine}
	for _, s := range h.cfg.Summaries.Summaries() {
		if s.Replica != h.cfg.Replica {
			sums = append(sums, s)
		}
	}
	h.mu.Lock()
	m := h.merger.Feed(h.merged, sums, now)
	h.subsets, h.last = m.Subsets, mine
	h.mu.Unlock()
	if m.Rejected > 0 {
		h.log.Debug("weights: ha: loads of unknown endpoints left out", "count", m.Rejected)
	}
}

// sync keeps, while this replica leads, the store holding the table it
// handed over last: written again at every step until the store holds it
// (a write lost with a lead whose session was already gone, or a store
// that lost its state). On taking the lead, or when the store holds no
// table and nothing was handed over since, it hands over computed (the
// table last computed) if the stored one differs from it by more than
// minChange (or there is none): the push policy ran while this replica
// did not lead, and so wrote nothing.
func (h *haWeights) sync(computed Table, minChange float64) {
	lead := h.cfg.Tables.Leader()
	cur, _, ok := h.cfg.Tables.Table()
	h.mu.Lock()
	first := lead && !h.led
	h.led = lead
	if !lead {
		h.want = nil
	}
	want := h.want
	h.mu.Unlock()
	switch {
	case !lead:
	case want != nil:
		if !ok || cur.At != want.At {
			h.cfg.Tables.WriteTable(*want)
		}
	case first || !ok:
		if computed.At.IsZero() {
			return
		}
		if mine := computed.Map(); !ok || tablesDiffer(cur.Weights, mine, minChange) {
			h.handOver(SharedTable{At: computed.At.UnixMilli(), Weights: mine})
		}
	}
}

// handOver hands t to the exchange to be written, and remembers it until
// the lead is lost.
func (h *haWeights) handOver(t SharedTable) {
	h.mu.Lock()
	h.want = &t
	h.mu.Unlock()
	h.cfg.Tables.WriteTable(t)
}

// tablesDiffer reports whether two weight maps differ in their services,
// their endpoints, or some endpoint's share by more than minChange.
func tablesDiffer(a, b map[string]map[string]uint32, minChange float64) bool {
	if len(a) != len(b) {
		return true
	}
	for name, wa := range a {
		wb, ok := b[name]
		if !ok || sharesMoved(wa, wb, minChange) {
			return true
		}
	}
	return false
}

// serve hands the leader's table to pub when it changed.
func (h *haWeights) serve(pub Publisher) {
	t, seq, ok := h.cfg.Tables.Table()
	h.mu.Lock()
	fresh := ok && (!h.servedT || seq != h.served)
	if fresh {
		h.served, h.servedT = seq, true
	}
	h.mu.Unlock()
	if fresh {
		pub.SetWeights(t.Weights)
	}
}

// publish is the publish stage's output in HA mode (the runner's
// Publish): the leader writes the table; every replica serves what is in
// the store (serve).
func (h *haWeights) publish(t Table) {
	if h.cfg.Tables.Leader() {
		h.handOver(SharedTable{At: t.At.UnixMilli(), Weights: t.Map()})
	}
}

// fleet returns what balancing a service sees in HA mode: the pseudo
// nodes of every replica's summary and their rates in the merged tracker.
func (h *haWeights) fleet(service string, at time.Time) (map[string][]string, map[string]map[string]float64) {
	h.mu.Lock()
	subs := h.subsets[service]
	h.mu.Unlock()
	return subs, h.merged.NodeRates(service, at)
}

// haMerge runs the HA merge stage with the pipeline's parts: summaries
// out and in, then the store synced with the table last computed and the
// leader's table served.
func (p *Pipeline) haMerge(now time.Time, view Subsets) {
	p.ha.merge(now, p.tracker, view)
	p.ha.sync(p.runner.Table(), p.runner.cfg.MinChange)
	p.ha.serve(p.cfg.Publisher)
}

// LastSummary returns the summary this replica built last (HA mode); false
// otherwise.
func (p *Pipeline) LastSummary() (Summary, bool) {
	if p.ha == nil {
		return Summary{}, false
	}
	p.ha.mu.Lock()
	defer p.ha.mu.Unlock()
	return p.ha.last, p.ha.last.Replica != ""
}
