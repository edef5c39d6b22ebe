package weights

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Summary is one replica's compact view of the load that reached it (HA,
// ha.enabled): per service, the latest fresh backend report per endpoint
// (ORCA, POST /v1/load) and the client load (LRS) of its own nodes,
// aggregated per distinct subset (nodes with the same subset are one
// group), never a row per node. It is what the replica publishes to the
// others; the weights leader merges every replica's summary into one
// tracker (Merger) and solves the global table from it.
type Summary struct {
	Replica  string           `json:"r"`
	At       int64            `json:"t"` // when built, unix ms
	Services []ServiceSummary `json:"s"`
}

// ServiceSummary is one service's part of a Summary. Endpoints lists the
// ids the loads refer to by position.
type ServiceSummary struct {
	Name      string        `json:"n"`
	Endpoints []string      `json:"e"`
	Backend   []BackendLoad `json:"b,omitempty"`
	Groups    []GroupLoad   `json:"g,omitempty"`
}

// BackendLoad is an endpoint's latest fresh backend report (named metrics,
// informational only, are left out).
type BackendLoad struct {
	E   int     `json:"e"` // position in ServiceSummary.Endpoints
	Age int64   `json:"t"` // Summary.At minus when measured, ms
	QPS float64 `json:"q,omitempty"`
	EPS float64 `json:"x,omitempty"`
	CPU float64 `json:"c,omitempty"`
	App float64 `json:"a,omitempty"`
}

// GroupLoad is the client load of the nodes sharing one subset: Members
// are the subset (positions, ascending), Loads the summed rates of those
// nodes per endpoint they reported on.
type GroupLoad struct {
	Members []int        `json:"m"`
	Loads   []ClientLoad `json:"l"`
}

// ClientLoad is one endpoint's load from a group of nodes: rates summed,
// utilization the largest any node reported, Age that of the latest.
type ClientLoad struct {
	E    int     `json:"e"`
	Age  int64   `json:"t"` // Summary.At minus the latest report, ms
	QPS  float64 `json:"q,omitempty"`
	EPS  float64 `json:"x,omitempty"`
	Util float64 `json:"u,omitempty"`
}

// ServiceReports is a service's fresh reports in a Tracker (Reports).
type ServiceReports struct {
	Name      string
	Endpoints []string                     // sorted ids
	Backend   map[string]Report            // endpoint -> latest backend report
	Nodes     map[string]map[string]Report // node -> endpoint -> latest client report
}

// Reports returns every service's fresh reports at now, services sorted.
func (t *Tracker) Reports(now time.Time) []ServiceReports {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]ServiceReports, 0, len(t.services))
	for _, name := range slices.Sorted(maps.Keys(t.services)) {
		s := t.services[name]
		sr := ServiceReports{Name: name, Endpoints: slices.Clone(s.ids),
			Backend: map[string]Report{}, Nodes: map[string]map[string]Report{}}
		for _, id := range s.ids {
			e := s.endpoints[id]
			if t.fresh(e.backend.At, now) {
				sr.Backend[id] = e.backend
			}
			for node, r := range e.nodes {
				if !t.fresh(r.At, now) {
					continue
				}
				if sr.Nodes[node] == nil {
					sr.Nodes[node] = map[string]Report{}
				}
				sr.Nodes[node][id] = r
			}
		}
		out = append(out, sr)
	}
	return out
}

// Prune drops the reports that are no longer fresh at now, as Update
// does; in HA mode nothing else updates the replica's own tracker.
func (t *Tracker) Prune(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.services {
		for _, e := range s.endpoints {
			for node, r := range e.nodes {
				if !t.fresh(r.At, now) {
					delete(e.nodes, node)
				}
			}
		}
	}
}

// BuildSummary summarizes a replica's fresh reports at now. subsets
// returns a service's connected nodes' subsets (Subsets.NodeSubsets); a
// reporting node without a subset is grouped by the endpoints it
// reported on. Services without fresh reports are left out. Rates are
// rounded to 5 significant digits (compactness).
func BuildSummary(replica string, now time.Time, svcs []ServiceReports, subsets func(service string) map[string][]string) Summary {
	sum := Summary{Replica: replica, At: now.UnixMilli()}
	for _, sr := range svcs {
		if len(sr.Backend) == 0 && len(sr.Nodes) == 0 {
			continue
		}
		pos := make(map[string]int, len(sr.Endpoints))
		for i, id := range sr.Endpoints {
			pos[id] = i
		}
		ss := ServiceSummary{Name: sr.Name, Endpoints: sr.Endpoints}
		for _, id := range sr.Endpoints {
			if r, ok := sr.Backend[id]; ok {
				ss.Backend = append(ss.Backend, BackendLoad{E: pos[id], Age: sum.At - r.At.UnixMilli(),
					QPS: round5(r.QPS), EPS: round5(r.EPS), CPU: round5(r.CPU), App: round5(r.App)})
			}
		}
		var subs map[string][]string
		if len(sr.Nodes) > 0 && subsets != nil {
			subs = subsets(sr.Name)
		}
		ss.Groups = groupNodes(sr.Nodes, subs, pos, sum.At)
		sum.Services = append(sum.Services, ss)
	}
	return sum
}

// groupNodes aggregates the nodes' client reports per distinct subset.
func groupNodes(nodes map[string]map[string]Report, subsets map[string][]string, pos map[string]int, at int64) []GroupLoad {
	type acc struct {
		members []int
		loads   map[int]*ClientLoad
	}
	groups := map[string]*acc{}
	for _, node := range slices.Sorted(maps.Keys(nodes)) {
		reps := nodes[node]
		sub := subsets[node]
		if len(sub) == 0 {
			sub = slices.Collect(maps.Keys(reps))
		}
		members := make([]int, 0, len(sub))
		for _, id := range sub {
			if i, ok := pos[id]; ok {
				members = append(members, i)
			}
		}
		slices.Sort(members)
		members = slices.Compact(members)
		key := groupKey(members)
		g := groups[key]
		if g == nil {
			g = &acc{members: members, loads: map[int]*ClientLoad{}}
			groups[key] = g
		}
		for id, r := range reps {
			i, ok := pos[id]
			if !ok {
				continue
			}
			l := g.loads[i]
			if l == nil {
				l = &ClientLoad{E: i, Age: math.MaxInt64}
				g.loads[i] = l
			}
			l.QPS, l.EPS = l.QPS+r.QPS, l.EPS+r.EPS
			l.Util = max(l.Util, r.Utilization())
			l.Age = min(l.Age, at-r.At.UnixMilli())
		}
	}
	out := make([]GroupLoad, 0, len(groups))
	for _, key := range slices.Sorted(maps.Keys(groups)) {
		g := groups[key]
		gl := GroupLoad{Members: g.members, Loads: make([]ClientLoad, 0, len(g.loads))}
		for _, i := range slices.Sorted(maps.Keys(g.loads)) {
			l := *g.loads[i]
			l.QPS, l.EPS, l.Util = round5(l.QPS), round5(l.EPS), round5(l.Util)
			gl.Loads = append(gl.Loads, l)
		}
		out = append(out, gl)
	}
	return out
}

// groupKey names a subset by its members' positions.
func groupKey(members []int) string {
	var b strings.Builder
	for _, m := range members {
		b.WriteString(strconv.Itoa(m))
		b.WriteByte(',')
	}
	return b.String()
}

// round5 rounds v to 5 significant digits.
func round5(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	p := math.Pow(10, 4-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}
