package console

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/weights"
	"github.com/xds-server/xds-server/xds"
)

// FleetView is /ui/api/fleet.
type FleetView struct {
	At    time.Time `json:"at"`
	Ready bool      `json:"ready"` // a discovery snapshot was served
	// Problems says what is wrong, worst first, in at most maxProblems
	// lines: services without a serving endpoint, unhealthy or draining
	// endpoints, stale discovery sources, rejected Consul config entries,
	// NACKs. Empty when all is well.
	Problems  []Problem      `json:"problems"`
	Services  []ServiceCount `json:"services"`
	Nodes     NodeCounts     `json:"nodes"`
	NACKs     []NodeNACK     `json:"nacks"` // nodes whose last response was rejected, at most maxNACKs
	NACKTotal float64        `json:"nack_total"`
	Discovery []SourceState  `json:"discovery"`
	// Datacenters are the Consul datacenters read, each ok or stale.
	Datacenters []DatacenterState `json:"datacenters"`
	// PolicyRejections are the Consul config entries whose current
	// version is rejected (each a problem too).
	PolicyRejections []RejectedEntry `json:"policy_rejections"`
	// PolicyUnserved are the traffic policies that cannot be served
	// (their services are served without them), by name, sorted (each a
	// problem too).
	PolicyUnserved []UnservedPolicy `json:"policy_unserved"`
	// PushLatency is xds_push_latency_seconds over all types: the count
	// in each bucket (not cumulative); the last bucket's le is +Inf (null).
	PushLatency []Bucket `json:"push_latency"`
}

// ServiceCount is one service's endpoints by health.
type ServiceCount struct {
	Name      string `json:"name"`
	Endpoints int    `json:"endpoints"`
	Healthy   int    `json:"healthy"` // healthy or unknown
	Degraded  int    `json:"degraded"`
	Draining  int    `json:"draining"`
	Unhealthy int    `json:"unhealthy"`
}

// NodeCounts are the connected nodes by cluster and by client kind
// (envoy, grpc, other), and the open streams by protocol (sotw, delta).
type NodeCounts struct {
	Connected  int            `json:"connected"`
	Known      int            `json:"known"` // connected, or gone within the grace period
	ByCluster  map[string]int `json:"by_cluster"`
	ByClient   map[string]int `json:"by_client"`
	ByProtocol map[string]int `json:"streams_by_protocol"`
}

// NodeNACK is a node's last NACK.
type NodeNACK struct {
	Node  string    `json:"node"`
	At    time.Time `json:"at"`
	Type  string    `json:"type"`
	Error string    `json:"error"`
}

// SourceState is a discovery source's health from its metrics.
type SourceState struct {
	Source      string    `json:"source"`
	Stale       bool      `json:"stale"`
	LastSuccess time.Time `json:"last_success,omitzero"`
	Errors      float64   `json:"errors"`
}

// Bucket is one histogram bucket: Count observations in (previous le, Le].
type Bucket struct {
	Le    *float64 `json:"le"` // seconds; nil is +Inf
	Count float64  `json:"count"`
}

const maxNACKs = 20

func (c *Console) fleet() FleetView {
	snap, ok := c.snapshot()
	v := FleetView{At: c.cfg.Now(), Ready: ok, Services: counts(snap), Discovery: []SourceState{}, Datacenters: []DatacenterState{}, PushLatency: []Bucket{},
		NACKs: []NodeNACK{}, Nodes: NodeCounts{ByCluster: map[string]int{}, ByClient: map[string]int{}, ByProtocol: map[string]int{}}}
	if c.cfg.Fleet != nil {
		nv := c.nodes.get(v.At, func() nodesView { return nodeCounts(c.cfg.Fleet.Nodes()) })
		v.Nodes, v.NACKs = nv.counts, nv.nacks
	}
	c.fromMetrics(&v)
	v.PolicyRejections = c.rejections()
	v.PolicyUnserved = c.unserved()
	v.Problems = problems(v)
	return v
}

// Problem is one line of what is wrong.
type Problem struct {
	Level string `json:"level"` // critical (traffic is at risk) or warning
	Text  string `json:"text"`
}

const maxProblems = 10

// problems lists what is wrong in v, critical first.
func problems(v FleetView) []Problem {
	var worst, bad []Problem
	crit := func(format string, args ...any) {
		worst = append(worst, Problem{"critical", fmt.Sprintf(format, args...)})
	}
	warn := func(format string, args ...any) { bad = append(bad, Problem{"warning", fmt.Sprintf(format, args...)}) }
	for _, s := range v.Services {
		serving := s.Healthy + s.Degraded
		switch {
		case serving == 0 && s.Endpoints > 0:
			crit("%s: no serving endpoint (%d unhealthy, %d draining)", s.Name, s.Unhealthy, s.Draining)
		case s.Unhealthy > 0 || s.Draining > 0:
			warn("%s: %d of %d endpoints unhealthy, %d draining", s.Name, s.Unhealthy, s.Endpoints, s.Draining)
		}
	}
	for _, d := range v.Discovery {
		if d.Stale {
			crit("discovery source %s is stale: serving the last known endpoints", d.Source)
		}
	}
	for _, d := range v.Datacenters {
		if d.Stale {
			warn("datacenter %s is stale since %s: serving its last known endpoints", d.Datacenter, d.StaleSince.Format(time.TimeOnly+" MST"))
		}
	}
	for _, r := range v.PolicyRejections {
		warn("%s", r.text())
	}
	for _, u := range v.PolicyUnserved {
		warn("traffic policy of %s not served (served without it): %s", u.Name, u.Error)
	}
	if n := len(v.NACKs); n > 0 {
		warn("%d nodes rejected their last update (NACK)", n)
	}
	out := append(worst, bad...)
	if len(out) > maxProblems {
		out = append(out[:maxProblems-1], Problem{"warning", fmt.Sprintf("and %d more", len(out)-maxProblems+1)})
	}
	if out == nil {
		out = []Problem{}
	}
	return out
}

// fromMetrics fills the parts of v that come from the metrics, gathered
// at most once per refreshEvery.
func (c *Console) fromMetrics(v *FleetView) {
	if c.cfg.Gatherer == nil {
		return
	}
	m := c.metrics.get(c.cfg.Now(), func() FleetView {
		fams, err := c.cfg.Gatherer.Gather()
		if err != nil {
			c.log.Debug("gathering metrics for the fleet page failed", "error", err)
		}
		m := FleetView{Nodes: NodeCounts{ByProtocol: map[string]int{}}, Discovery: []SourceState{}, PushLatency: []Bucket{}}
		fromMetrics(&m, fams)
		return m
	})
	v.Nodes.ByProtocol, v.NACKTotal, v.Discovery, v.PushLatency = m.Nodes.ByProtocol, m.NACKTotal, m.Discovery, m.PushLatency
	v.Datacenters = m.Datacenters
}

func counts(snap discovery.Snapshot) []ServiceCount {
	out := make([]ServiceCount, 0, len(snap.Services))
	for _, svc := range snap.Services {
		sc := ServiceCount{Name: svc.Name, Endpoints: len(svc.Endpoints)}
		for _, ep := range svc.Endpoints {
			switch ep.Health {
			case discovery.HealthDegraded:
				sc.Degraded++
			case discovery.HealthDraining:
				sc.Draining++
			case discovery.HealthUnhealthy:
				sc.Unhealthy++
			default:
				sc.Healthy++
			}
		}
		out = append(out, sc)
	}
	return out
}

// nodesView is what the fleet page shows of the node list; shared by
// the responses of a second: read only.
type nodesView struct {
	counts NodeCounts
	nacks  []NodeNACK
}

// nodeCounts counts the connected nodes and keeps the maxNACKs latest NACKs.
func nodeCounts(nodes []xds.Node) nodesView {
	v := nodesView{counts: NodeCounts{Known: len(nodes), ByCluster: map[string]int{}, ByClient: map[string]int{}, ByProtocol: map[string]int{}},
		nacks: []NodeNACK{}}
	for _, n := range nodes {
		if n.LastNACK != nil {
			v.nacks = append(v.nacks, NodeNACK{Node: n.ID, At: n.LastNACK.At, Type: typeName(n.LastNACK.TypeURL), Error: n.LastNACK.Error})
		}
		if n.Streams == 0 {
			continue
		}
		v.counts.Connected++
		v.counts.ByCluster[n.Cluster]++
		v.counts.ByClient[clientKind(n.UserAgent)]++
	}
	slices.SortFunc(v.nacks, func(a, b NodeNACK) int { return b.At.Compare(a.At) })
	if len(v.nacks) > maxNACKs {
		v.nacks = v.nacks[:maxNACKs]
	}
	return v
}

func typeName(url string) string { return url[strings.LastIndexByte(url, '.')+1:] }

func clientKind(ua string) string {
	switch {
	case strings.Contains(strings.ToLower(ua), "envoy"):
		return "envoy"
	case strings.HasPrefix(strings.ToLower(ua), "grpc"):
		return "grpc"
	}
	return "other"
}

// fromMetrics fills the parts of v that come from the metrics.
func fromMetrics(v *FleetView, fams []*dto.MetricFamily) {
	src, dcs := map[string]*SourceState{}, datacenters{}
	state := func(m *dto.Metric) *SourceState {
		name := label(m, "source")
		if src[name] == nil {
			src[name] = &SourceState{Source: name}
		}
		return src[name]
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "xds_streams":
				v.Nodes.ByProtocol[label(m, "protocol")] = int(m.GetGauge().GetValue())
			case "xds_nacks_total":
				v.NACKTotal += m.GetCounter().GetValue()
			case "xds_discovery_stale":
				state(m).Stale = m.GetGauge().GetValue() > 0
			case "xds_discovery_errors_total":
				state(m).Errors = m.GetCounter().GetValue()
			case "xds_discovery_last_success_timestamp_seconds":
				if s := m.GetGauge().GetValue(); s > 0 {
					state(m).LastSuccess = time.Unix(0, int64(s*1e9)).UTC()
				}
			case "xds_push_latency_seconds":
				v.PushLatency = addHistogram(v.PushLatency, m.GetHistogram())
			default:
				dcs.add(f.GetName(), m)
			}
		}
	}
	for _, s := range src {
		v.Discovery = append(v.Discovery, *s)
	}
	slices.SortFunc(v.Discovery, func(a, b SourceState) int { return strings.Compare(a.Source, b.Source) })
	v.Datacenters = dcs.list()
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// addHistogram adds h's per-bucket counts to acc (same bounds assumed).
func addHistogram(acc []Bucket, h *dto.Histogram) []Bucket {
	bs := h.GetBucket()
	if len(acc) == 0 {
		for _, b := range bs {
			le := b.GetUpperBound()
			acc = append(acc, Bucket{Le: &le})
		}
		acc = append(acc, Bucket{})
	}
	if len(acc) != len(bs)+1 {
		return acc
	}
	prev := 0.0
	for i, b := range bs {
		acc[i].Count += float64(b.GetCumulativeCount()) - prev
		prev = float64(b.GetCumulativeCount())
	}
	acc[len(bs)].Count += math.Max(0, float64(h.GetSampleCount())-prev)
	return acc
}

// table is the weight table, or an empty one.
func (c *Console) table() weights.Table {
	if c.cfg.Weights == nil {
		return weights.Table{}
	}
	return c.cfg.Weights.Table()
}
