package weights

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/internal/metricreg"
)

// ZoneRow is one zone's line of a service's spill state on
// /debug/weights (ServiceTable.Zones).
type ZoneRow struct {
	Region string `json:"region"`
	Zone   string `json:"zone"`
	ZoneSpill
	Reason    string `json:"reason"`    // SpillLocal, SpillSpilling or SpillRecovering
	Endpoints int    `json:"endpoints"` // endpoints of the zone in discovery
	Serving   int    `json:"serving"`   // of them serving with a known capacity (what Capacity sums, unless the zone is idle: see zoneLoads)
}

// endpointZone is where discovery puts an endpoint, and whether it takes
// new requests (not unhealthy, not draining).
type endpointZone struct {
	zone    ZoneKey
	serving bool
}

// spillStage is the spill stage (stages.go): the controller over the
// zones of the services with ServiceConfig.Spill, their publication
// through a SpillPublisher, and their metrics.
type spillStage struct {
	ctl       *Spiller
	pub       SpillPublisher // nil: the publisher takes no spill states (computed and shown only)
	minChange float64
	log       *slog.Logger

	mu        sync.Mutex
	zones     map[string]map[string]endpointZone // service -> endpoint id -> zone (Observe)
	latest    map[string]map[ZoneKey]ZoneSpill   // as last computed
	published map[string]map[ZoneKey]ZoneSpill   // as last published (or would have been, without a SpillPublisher)
	series    map[string][]ZoneKey               // the metric series set per service

	keep, util, spare *prometheus.GaugeVec
	publishes         prometheus.Counter
}

func newSpillStage(cfg PipelineConfig, log *slog.Logger) (*spillStage, error) {
	ctl, err := NewSpiller(SpillConfigFrom(cfg.Tracker))
	if err != nil {
		return nil, fmt.Errorf("weights: %w", err)
	}
	s := &spillStage{ctl: ctl, minChange: cmp.Or(cfg.MinChange, DefaultMinChange), log: log,
		zones: map[string]map[string]endpointZone{}, series: map[string][]ZoneKey{}}
	s.pub, _ = cfg.Publisher.(SpillPublisher)
	labels := []string{"service", "region", "zone"}
	s.keep = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "xds_weights_zone_keep",
		Help: "Share of a zone's own nodes' requests the zone keeps (capacity-aware spill, services with a locality failover list); 1 = no spill."}, labels)
	s.util = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "xds_weights_zone_utilization",
		Help: "Load over capacity of a zone's serving endpoints of known capacity, as last computed; 0 = unknown."}, labels)
	s.spare = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "xds_weights_zone_spare_rps",
		Help: "Requests/s a zone's serving endpoints can still take below weights.overload_threshold, as last computed."}, labels)
	s.publishes = prometheus.NewCounter(prometheus.CounterOpts{Name: "xds_weights_spill_publishes_total",
		Help: "Spill states handed to the xDS server because some zone's keep share moved enough or a zone appeared or left."})
	if err := metricreg.Register(cfg.Registerer, s.keep, s.util, s.spare, s.publishes); err != nil {
		return nil, fmt.Errorf("weights: spill: metrics: %w", err)
	}
	return s, nil
}

// observe takes the zones of the endpoints of the services with spill on
// (and weights enabled) from a discovery snapshot: an endpoint's zone is
// its locality's region and zone; it serves when its health does
// (discovery.Health.Serving: unhealthy and draining endpoints, whatever
// drained them, do not).
func (s *spillStage) observe(snap discovery.Snapshot, services func(string) ServiceConfig) {
	zones := map[string]map[string]endpointZone{}
	for _, svc := range snap.Services {
		if set := services(svc.Name); !set.Enabled || !set.Spill {
			continue
		}
		m := make(map[string]endpointZone, len(svc.Endpoints))
		for _, ep := range svc.Endpoints {
			m[ep.ID] = endpointZone{zone: ZoneKey{Region: ep.Locality.Region, Zone: ep.Locality.Zone}, serving: ep.Health.Serving()}
		}
		zones[svc.Name] = m
	}
	s.mu.Lock()
	s.zones = zones
	s.mu.Unlock()
}

// zoneLoads sums, per zone of zones (every zone listed, even without
// capacity), the Capacity and QPS of the rows of st whose endpoints serve
// and have a known capacity; it also counts each zone's endpoints and
// those summed. An endpoint of unknown capacity (no usable report yet,
// expired) adds neither load nor capacity: its zone's utilization is that
// of the endpoints that report. But an idle zone, one whose serving
// endpoints all have an unknown capacity and no load (no requests yet: a
// zone without clients of its own), counts each of them at the mean
// capacity of the service's endpoints summed (fillIdle): it can take
// spill, and its utilization stays unknown.
func zoneLoads(st ServiceTable, zones map[string]endpointZone) (map[ZoneKey]ZoneLoad, map[ZoneKey][2]int) {
	loads := map[ZoneKey]ZoneLoad{}
	counts := map[ZoneKey][2]int{}
	idle := map[ZoneKey]int{} // serving endpoints of zones idle so far; -1: not idle
	for id, ez := range zones {
		l, n := loads[ez.zone], counts[ez.zone]
		n[0]++
		r, ok := st.Row(id)
		switch {
		case ok && ez.serving && r.Capacity > 0 && !math.IsInf(r.Capacity, 0):
			l.Capacity += r.Capacity
			l.Load += clean(r.QPS)
			n[1]++
			idle[ez.zone] = -1
		case ez.serving && idle[ez.zone] >= 0 && (!ok || clean(r.QPS) == 0):
			idle[ez.zone]++
		case ez.serving:
			idle[ez.zone] = -1 // load of unknown capacity: not idle
		}
		loads[ez.zone], counts[ez.zone] = l, n
	}
	fillIdle(loads, counts, idle)
	return loads, counts
}

// fillIdle gives each idle zone (idle: zone -> its serving endpoints, or
// -1 when not idle) the mean capacity per summed endpoint of loads
// (counts[1]) times its endpoints; nothing when no endpoint is summed.
func fillIdle(loads map[ZoneKey]ZoneLoad, counts map[ZoneKey][2]int, idle map[ZoneKey]int) {
	total, n := 0.0, 0
	for k, l := range loads {
		total, n = total+l.Capacity, n+counts[k][1]
	}
	if n == 0 {
		return
	}
	for k, m := range idle {
		if m > 0 {
			loads[k] = ZoneLoad{Capacity: float64(m) * total / float64(n)}
		}
	}
}

// step is the spill stage: it steps the controller over every spill
// service's zones with table t (at t.At), shows the states in t's
// ServiceTable.Zones and the metrics, and publishes them when they moved
// (spillChanged against those last published). It returns t annotated.
func (s *spillStage) step(t Table) Table {
	out, all, publish := s.compute(t)
	if publish && s.pub != nil {
		s.publishes.Inc()
		s.pub.SetSpill(all) // outside the lock: the publisher may ask for anything; all is never written again
	}
	return out
}

// compute runs the stage's pure part under the lock: the states of every
// spill service at t.At, t annotated, and whether they moved enough to be
// published.
func (s *spillStage) compute(t Table) (Table, map[string]map[ZoneKey]ZoneSpill, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.zones) == 0 && len(s.published) == 0 {
		return t, nil, false // no spill service, now or at the last publication
	}
	out := t
	out.Services = slices.Clone(t.Services)
	all := make(map[string]map[ZoneKey]ZoneSpill, len(s.zones))
	keep := make(map[string]bool, len(s.zones))
	for name, zones := range s.zones {
		st, _ := t.Service(name)
		loads, counts := zoneLoads(st, zones)
		states := s.ctl.Step(t.At, name, loads)
		all[name], keep[name] = states, true
		rows := make([]ZoneRow, 0, len(states))
		for _, k := range slices.SortedFunc(maps.Keys(states), compareZones) {
			_, reason, _ := s.ctl.State(name, k)
			z := states[k]
			rows = append(rows, ZoneRow{Region: k.Region, Zone: k.Zone, ZoneSpill: z, Reason: reason,
				Endpoints: counts[k][0], Serving: counts[k][1]})
		}
		if i, ok := slices.BinarySearchFunc(out.Services, name, func(st ServiceTable, n string) int {
			return cmp.Compare(st.Name, n)
		}); ok {
			out.Services[i].Zones = rows
		}
	}
	s.ctl.Forget(keep)
	s.record(all)
	s.latest = all
	if !spillChanged(s.published, all, s.minChange) { // nil and empty are alike: nothing to say before a zone
		return out, all, false
	}
	s.published = all
	return out, all, true
}

// record sets the metrics of every zone in all and deletes the series of
// the zones that left.
func (s *spillStage) record(all map[string]map[ZoneKey]ZoneSpill) {
	for name, keys := range s.series {
		for _, k := range keys {
			if _, ok := all[name][k]; !ok {
				for _, g := range []*prometheus.GaugeVec{s.keep, s.util, s.spare} {
					g.DeleteLabelValues(name, k.Region, k.Zone)
				}
			}
		}
	}
	clear(s.series)
	for name, states := range all {
		for k, z := range states {
			s.keep.WithLabelValues(name, k.Region, k.Zone).Set(z.Keep)
			s.util.WithLabelValues(name, k.Region, k.Zone).Set(z.Utilization)
			s.spare.WithLabelValues(name, k.Region, k.Zone).Set(z.Spare)
			s.series[name] = append(s.series[name], k)
		}
	}
}

// Spill returns the spill states as last computed.
func (s *spillStage) Spill() map[string]map[ZoneKey]ZoneSpill {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest
}

// spillChanged reports whether new differs enough from old to publish: a
// service or a zone appeared or left, or some zone's Keep moved to or
// from 1, or by more than minChange relative to the smaller of its kept
// and spilled shares (0.05: a zone keeping 0.7 moves on 0.015, one
// keeping 0.97 on 0.0015). Utilization and Spare alone never publish:
// they move with every report.
func spillChanged(old, new map[string]map[ZoneKey]ZoneSpill, minChange float64) bool {
	if len(old) != len(new) {
		return true
	}
	for name, o := range old {
		n, ok := new[name]
		if !ok || len(n) != len(o) {
			return true
		}
		for k, oz := range o {
			nz, ok := n[k]
			if !ok {
				return true
			}
			a, b := oz.Keep, nz.Keep
			if a != b && (a == 1 || b == 1 || math.Abs(a-b) > minChange*min(a, 1-a)) {
				return true
			}
		}
	}
	return false
}

// Spill returns the spill states as last computed: service -> zone ->
// state, for the services with spill on (ServiceConfig.Spill); nil
// before the first Step. The maps are shared (with the publisher too):
// read only.
func (p *Pipeline) Spill() map[string]map[ZoneKey]ZoneSpill { return p.spill.Spill() }
