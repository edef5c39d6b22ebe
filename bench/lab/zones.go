package main

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// The zone lab (--zones, issue 26): clients in two zones, backends of
// equal capacity but fewer in zone a than its clients' demand needs, and
// the locality policies compared on cross-zone traffic against the spread
// of utilization.

// Zone names of the zone lab.
const (
	zoneA = "a" // the small zone: less capacity than its clients' demand
	zoneB = "b" // the large zone: spare capacity
)

// zoneCapacity is the capacity of every backend of the zone lab,
// requests/s at utilization 1.
const zoneCapacity = 100.0

// Issue 26's target for capacity-aware spill on the zone-skewed fleet.
const (
	spillMaxMeanTarget = 1.15 // max/mean utilization, at most
	spillInZoneTarget  = 0.80 // share of requests served in the client's zone, at least
)

// zonePreset sets o to the zone lab's defaults (--zones): 10 backends (4
// in zone a, 6 in zone b), 12 clients (6 per zone) of equal rates at a
// mean utilization of 0.8, so that zone a's clients alone ask 1.25 x
// 0.8 = 1.0 of zone a's capacity; 3 runs of 60 s per policy, figures over
// the last 20 s. Other flags override it.
func (o *options) zonePreset() {
	o.zones = true
	o.backends, o.clients, o.util, o.sigma, o.runs = 10, 12, 0.8, 0, 3
	o.zoneShare, o.distribute = 0.4, 0.8
	o.duration, o.final, o.window = 60*time.Second, 20*time.Second, 5*time.Second
}

// zoneFleet is the zone lab's fleet: every backend's and client's zone,
// the backends' capacities and the clients' rates.
type zoneFleet struct {
	backendZones []string  // by backend
	caps         []float64 // requests/s at utilization 1, by backend
	clientZones  []string  // by client
	rates        []float64 // requests/s, by client
}

// newZoneFleet is the fleet of o: round(o.zoneShare x backends) backends
// (at least one, and one left for zone b) in zone a, the rest in zone b,
// each of zoneCapacity; half the clients (rounded down) in zone a, each
// asking o.util x the total capacity / clients.
func newZoneFleet(o options) zoneFleet {
	var f zoneFleet
	inA := min(max(1, int(math.Round(o.zoneShare*float64(o.backends)))), o.backends-1)
	for j := range o.backends {
		f.backendZones = append(f.backendZones, zoneOf(j < inA))
		f.caps = append(f.caps, zoneCapacity)
	}
	rate := o.util * zoneCapacity * float64(o.backends) / float64(o.clients)
	for i := range o.clients {
		f.clientZones = append(f.clientZones, zoneOf(i < o.clients/2))
		f.rates = append(f.rates, rate)
	}
	return f
}

func zoneOf(inA bool) string {
	if inA {
		return zoneA
	}
	return zoneB
}

// demandOverCapacity is a zone's clients' demand over its backends'
// capacity: its utilization if it served only its own clients.
func (f zoneFleet) demandOverCapacity(zone string) float64 {
	var demand, capacity float64
	for i, z := range f.clientZones {
		if z == zone {
			demand += f.rates[i]
		}
	}
	for j, z := range f.backendZones {
		if z == zone {
			capacity += f.caps[j]
		}
	}
	if capacity == 0 {
		return 0
	}
	return demand / capacity
}

// zonePolicy is one locality policy of the zone lab.
type zonePolicy struct {
	name       string  // as in the table
	failover   bool    // locality.failover: [zone]
	distribute float64 // locality.distribute; 0: none
	spill      bool    // weights enabled (spill is on by default with them and a failover list)
}

// zonePolicies are the four: round robin without locality,
// strict failover, distribute and capacity-aware spill.
func zonePolicies(o options) []zonePolicy {
	return []zonePolicy{
		{name: "round_robin"},
		{name: "strict failover", failover: true},
		{name: fmt.Sprintf("distribute %g", o.distribute), failover: true, distribute: o.distribute},
		{name: "spill", failover: true, spill: true},
	}
}

// slug names the policy's files.
func (p zonePolicy) slug() string {
	return "zones-" + strings.NewReplacer(" ", "-", ".", "").Replace(p.name)
}

// serverConfig is xds-server's YAML for the policy: Consul discovery of
// the lab service, every endpoint in every node's set (no subsets);
// round_robin without weights, or (spill) ring_hash with global weights
// from [orca, lrs], grpc-go honouring endpoint weights only there.
func (p zonePolicy) serverConfig(consul string, o options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "discovery:\n  source: consul\n  consul: { address: %q, services: [%s] }\n", consul, service)
	fmt.Fprintf(&b, "services:\n  %s:\n", service)
	if p.failover {
		b.WriteString("    locality: { failover: [zone]")
		if p.distribute > 0 {
			fmt.Fprintf(&b, ", distribute: %g", p.distribute)
		}
		b.WriteString(" }\n")
	}
	if !p.spill {
		b.WriteString("    lb_policy: round_robin\n")
		return b.String()
	}
	b.WriteString("    lb_policy: ring_hash\n")
	fmt.Fprintf(&b, "    ring_hash: { minimum_ring_size: %d, maximum_ring_size: %d }\n", o.ringSize, o.ringSize)
	b.WriteString("    weights: { enabled: true, mode: global, sources: [orca, lrs] }\n")
	if o.fast {
		b.WriteString("weights: { blackout_period: 2s, min_push_interval: 2s }\n")
	}
	return b.String()
}

// zoneFigures are one zone policy's run.
type zoneFigures struct {
	InZone   float64            // share of the successful requests sent in the final window served in their client's zone
	MaxMean  float64            // of the backends' mean utilization over the final window
	MeanUtil float64            // mean of the backends' mean utilization over the final window
	ZoneUtil map[string]float64 // by zone: the mean of its backends' mean utilization over the final window
	Requests int64              // sent over the whole run
	Errors   int64              // failed, over the whole run
	P99      float64            // ms, client latency of the successful requests
}

// inZoneShare is the share of counts (successful requests by client zone
// and serving zone) served in the client's zone; 0 for none.
func inZoneShare(counts map[[2]string]int64) float64 {
	var in, all int64
	for k, n := range counts {
		all += n
		if k[0] == k[1] {
			in += n
		}
	}
	if all == 0 {
		return 0
	}
	return float64(in) / float64(all)
}

// zoneUtil is the mean of each zone's backends' utilizations us (by
// backend, zones[j] being backend j's zone).
func zoneUtil(us []float64, zones []string) map[string]float64 {
	sum, n := map[string]float64{}, map[string]int{}
	for j, u := range us {
		sum[zones[j]] += u
		n[zones[j]]++
	}
	out := map[string]float64{}
	for z, s := range sum {
		out[z] = s / float64(n[z])
	}
	return out
}

// medianZoneFigures is every figure's median over runs (at least one),
// errors and requests their sums.
func medianZoneFigures(runs []zoneFigures) zoneFigures {
	med := func(f func(zoneFigures) float64) float64 {
		xs := make([]float64, len(runs))
		for k, r := range runs {
			xs[k] = f(r)
		}
		return median(xs)
	}
	m := zoneFigures{ZoneUtil: map[string]float64{}}
	m.InZone = med(func(r zoneFigures) float64 { return r.InZone })
	m.MaxMean = med(func(r zoneFigures) float64 { return r.MaxMean })
	m.MeanUtil = med(func(r zoneFigures) float64 { return r.MeanUtil })
	m.P99 = med(func(r zoneFigures) float64 { return r.P99 })
	for z := range runs[0].ZoneUtil {
		m.ZoneUtil[z] = med(func(r zoneFigures) float64 { return r.ZoneUtil[z] })
	}
	for _, r := range runs {
		m.Requests += r.Requests
		m.Errors += r.Errors
	}
	return m
}

// spillMeets reports whether spill's medians meet issue 26's target.
func spillMeets(f zoneFigures) bool {
	return f.MaxMean <= spillMaxMeanTarget && f.InZone >= spillInZoneTarget
}
