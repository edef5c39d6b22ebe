package weights

import (
	"errors"
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

// haState is the Pipeline's HA part.
type haState struct {
	cfg    HAConfig
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

// haMerge is the HA merge stage, before the merged tracker's table is
// taken: it builds and hands over this replica's summary (over the nodes'
// subsets in view), feeds every replica's latest summary (its own fresh)
// into the merged tracker, and serves the leader's table when it changed.
func (p *Pipeline) haMerge(now time.Time, view Subsets) {
	h := p.ha
	p.tracker.Prune(now)
	own := BuildSummary(h.cfg.Replica, now, p.tracker.Reports(now), view.NodeSubsets)
	h.cfg.Summaries.PublishSummary(own)
	sums := []Summary{own}
	for _, s := range h.cfg.Summaries.Summaries() {
		if s.Replica != h.cfg.Replica {
			sums = append(sums, s)
		}
	}
	h.mu.Lock()
	m := h.merger.Feed(h.merged, sums, now)
	h.subsets, h.last = m.Subsets, own
	h.mu.Unlock()
	if m.Rejected > 0 {
		p.log.Debug("weights: ha: loads of unknown endpoints left out", "count", m.Rejected)
	}
	p.syncShared()
	p.serveShared()
}

// syncShared keeps, while this replica leads, the store holding the table
// it handed over last: written again at every step until the store holds
// it (a write lost with a lead whose session was already gone, or a store
// that lost its state). On taking the lead, or when the store holds no
// table and nothing was handed over since, it hands over the table last
// computed if the stored one differs from it by more than the push policy
// tolerates (or there is none): the runner's push policy ran while this
// replica did not lead, and so wrote nothing.
func (p *Pipeline) syncShared() {
	h := p.ha
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
		t := p.runner.Table()
		if t.At.IsZero() {
			return
		}
		if mine := t.Map(); !ok || tablesDiffer(cur.Weights, mine, p.runner.cfg.MinChange) {
			p.handOver(SharedTable{At: t.At.UnixMilli(), Weights: mine})
		}
	}
}

// handOver hands t to the exchange to be written, and remembers it until
// the lead is lost.
func (p *Pipeline) handOver(t SharedTable) {
	p.ha.mu.Lock()
	p.ha.want = &t
	p.ha.mu.Unlock()
	p.ha.cfg.Tables.WriteTable(t)
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

// serveShared hands the leader's table to the publisher when it changed.
func (p *Pipeline) serveShared() {
	h := p.ha
	t, seq, ok := h.cfg.Tables.Table()
	h.mu.Lock()
	fresh := ok && (!h.servedT || seq != h.served)
	if fresh {
		h.served, h.servedT = seq, true
	}
	h.mu.Unlock()
	if fresh {
		p.cfg.Publisher.SetWeights(t.Weights)
	}
}

// haPublish is the runner's Publish in HA mode: the leader writes the
// table; every replica serves what is in the store (serveShared).
func (p *Pipeline) haPublish(t Table) {
	if p.ha.cfg.Tables.Leader() {
		p.handOver(SharedTable{At: t.At.UnixMilli(), Weights: t.Map()})
	}
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
