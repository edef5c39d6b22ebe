package xds

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"

	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/xdscache"
)

// NodeLevels is what /debug/config shows of a node's localities: its
// place and, per service with a locality policy, the priority levels of
// the load assignment it was sent.
type NodeLevels struct {
	Place    translate.Place            `json:"place"`
	Services map[string][]PriorityLevel `json:"services"`
}

// PriorityLevel is one priority of a node's load assignment.
type PriorityLevel struct {
	Priority   uint32          `json:"priority"`
	Localities []LevelLocality `json:"localities"`
}

// LevelLocality is one locality of a priority level.
type LevelLocality struct {
	Region    string `json:"region,omitempty"`
	Zone      string `json:"zone,omitempty"`
	SubZone   string `json:"sub_zone,omitempty"`
	Weight    uint32 `json:"weight"`    // its locality weight
	Endpoints int    `json:"endpoints"` // sent
	Serving   int    `json:"serving"`   // of which healthy, degraded or unknown
}

// nodeLevels summarizes the load assignments of the locality services in
// snap for node (nil when there are none).
func (s *Server) nodeLevels(node Node, snap *cache.Snapshot) *NodeLevels {
	s.rec.mu.Lock()
	locals := s.rec.sub.local.services
	at := s.rec.sub.local.place(node)
	s.rec.mu.Unlock()
	if len(locals) == 0 {
		return nil
	}
	out := &NodeLevels{Place: at, Services: map[string][]PriorityLevel{}}
	for _, ls := range locals {
		r, ok := snap.Resources[types.Endpoint].Items[ls.in.Name]
		if !ok {
			continue
		}
		m, err := xdscache.Decode(r.Resource)
		if err != nil {
			continue
		}
		out.Services[ls.in.Name] = levels(m.(*endpointv3.ClusterLoadAssignment))
	}
	return out
}

// levels lists cla's priorities, in order, with their localities.
func levels(cla *endpointv3.ClusterLoadAssignment) []PriorityLevel {
	var out []PriorityLevel
	for _, l := range cla.GetEndpoints() {
		p := l.GetPriority()
		if len(out) == 0 || out[len(out)-1].Priority != p {
			out = append(out, PriorityLevel{Priority: p})
		}
		ll := LevelLocality{Region: l.GetLocality().GetRegion(), Zone: l.GetLocality().GetZone(),
			SubZone: l.GetLocality().GetSubZone(), Weight: l.GetLoadBalancingWeight().GetValue(),
			Endpoints: len(l.GetLbEndpoints())}
		for _, e := range l.GetLbEndpoints() {
			switch e.GetHealthStatus() {
			case corev3.HealthStatus_HEALTHY, corev3.HealthStatus_DEGRADED, corev3.HealthStatus_UNKNOWN:
				ll.Serving++
			}
		}
		last := &out[len(out)-1]
		last.Localities = append(last.Localities, ll)
	}
	return out
}

// ServiceLevels is one node's priority levels of one service with a
// locality policy, and the place they were made for.
type ServiceLevels struct {
	Place  translate.Place `json:"place"`
	Levels []PriorityLevel `json:"levels"`
}

// LevelsOf returns node's priority levels of service as last sent, or
// false if the node or service is unknown, the node has no snapshot yet,
// or the service has no locality policy.
func (s *Server) LevelsOf(service, node string) (ServiceLevels, bool) {
	n, ok := s.reg.get(node)
	if !ok {
		return ServiceLevels{}, false
	}
	snap, ok := s.rec.snapshotOf(node)
	if !ok {
		return ServiceLevels{}, false
	}
	lv := s.nodeLevels(n, snap)
	if lv == nil {
		return ServiceLevels{}, false
	}
	levels, ok := lv.Services[service]
	return ServiceLevels{Place: lv.Place, Levels: levels}, ok
}
