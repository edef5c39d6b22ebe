package envoy

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// MetadataNamespace is the filter_metadata key under which each endpoint's
// "id" and Meta entries are sent.
const MetadataNamespace = "xds-server"

// healthStatuses maps HealthStatus onto EDS health_status.
var healthStatuses = map[HealthStatus]corev3.HealthStatus{
	HealthUnknown:   corev3.HealthStatus_UNKNOWN,
	HealthHealthy:   corev3.HealthStatus_HEALTHY,
	HealthUnhealthy: corev3.HealthStatus_UNHEALTHY,
	HealthDraining:  corev3.HealthStatus_DRAINING,
	HealthDegraded:  corev3.HealthStatus_DEGRADED,
}

// serving reports whether clients send new requests to an endpoint in state h.
func (h HealthStatus) serving() bool {
	return h == HealthHealthy || h == HealthDegraded || h == HealthUnknown
}

// LoadAssignment returns the ClusterLoadAssignment of s, named s.Name, that
// Envoy and grpc-go both accept:
//
//   - endpoints are grouped by priority and locality, groups sorted by
//     priority, then region, zone and sub-zone, endpoints of a group in
//     input order; the priorities must be contiguous from 0;
//   - every group carries a locality message, even when all its fields are
//     empty (grpc-go NACKs a group without one);
//   - endpoint weights are Endpoint.Weight, 0 sent as 1; a locality whose
//     weights sum to 2^32-1 or more has them scaled down (see fitWeights);
//   - a locality's weight is the sum of the input weights (0 counted as 1)
//     of its serving endpoints (healthy, degraded or unknown), or 1 when none
//     serves, so a locality's share follows the capacity that can take
//     requests; scaled down the same way when the localities' sum would
//     reach 2^32-1, every weight staying >= 1; s.LocalityWeights, where
//     it lists a group, sets its weight instead;
//   - s.OverprovisioningFactor, when not 0, is the policy's
//     overprovisioning_factor;
//   - hostname is Endpoint.ID, and filter_metadata[MetadataNamespace] holds
//     the Meta entries plus "id" and "datacenter" (these win over Meta keys
//     of the same name; each left out when empty; no metadata when all
//     are empty).
//
// A service without endpoints gives a load assignment without endpoints.
func LoadAssignment(s Service) (*endpointv3.ClusterLoadAssignment, error) {
	if err := errors.Join(validateName(s), validateEndpoints(s), validatePriorities(s)); err != nil {
		return nil, err
	}
	groups := groupByLocality(s.Endpoints)
	weights, err := localityWeights(groups, s.LocalityWeights)
	if err != nil {
		return nil, fmt.Errorf("envoy: load assignment %q: locality weights: %w", s.Name, err)
	}
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: s.Name}
	stamp := clusterStampMeta(s.ClusterStamp)
	for i, g := range groups {
		lle, err := localityEndpoints(g, weights[i])
		if err != nil {
			return nil, fmt.Errorf("envoy: load assignment %q: %w", s.Name, err)
		}
		lle.Metadata = stamp
		cla.Endpoints = append(cla.Endpoints, lle)
	}
	if s.OverprovisioningFactor > 0 {
		cla.Policy = &endpointv3.ClusterLoadAssignment_Policy{
			OverprovisioningFactor: wrapperspb.UInt32(s.OverprovisioningFactor)}
	}
	return validated(cla, "load assignment", s.Name)
}

// localityWeights returns each group's weight: its entry in set, else the
// sum of the weights (0 counted as 1) of its serving endpoints, or 1 when
// none serves; fitted so that the groups of one priority sum below 2^32-1.
func localityWeights(groups []localityGroup, set map[PriorityLocality]uint32) ([]uint32, error) {
	out := make([]uint32, 0, len(groups))
	for start := 0; start < len(groups); {
		end := start
		for end < len(groups) && groups[end].priority == groups[start].priority {
			end++
		}
		raw := make([]uint64, end-start)
		for i, g := range groups[start:end] {
			if w, ok := set[PriorityLocality{g.priority, g.locality}]; ok {
				raw[i] = uint64(max(w, 1))
				continue
			}
			for _, e := range g.endpoints {
				if e.Health.serving() {
					raw[i] += uint64(max(e.Weight, 1))
				}
			}
			raw[i] = max(raw[i], 1)
		}
		w, err := fitWeights(raw)
		if err != nil {
			return nil, err
		}
		out, start = append(out, w...), end
	}
	return out, nil
}

// validatePriorities checks that the endpoints' priorities are contiguous
// from 0.
func validatePriorities(s Service) error {
	seen := map[uint32]bool{}
	top := uint32(0)
	for _, e := range s.Endpoints {
		seen[e.Priority], top = true, max(top, e.Priority)
	}
	for p := range top {
		if !seen[p] {
			return fmt.Errorf("envoy: service %q: no endpoint at priority %d, below priority %d (priorities must be contiguous from 0)", s.Name, p, top)
		}
	}
	return nil
}

// localityGroup is the endpoints of one locality at one priority, in
// input order.
type localityGroup struct {
	priority  uint32
	locality  Locality
	endpoints []Endpoint
}

// groupByLocality groups eps by priority and locality, sorted by priority,
// region, zone and sub-zone; each group keeps the input order of its
// endpoints.
func groupByLocality(eps []Endpoint) []localityGroup {
	byLocality := make(map[PriorityLocality][]Endpoint)
	for _, e := range eps {
		k := PriorityLocality{e.Priority, e.Locality}
		byLocality[k] = append(byLocality[k], e)
	}
	keys := slices.SortedFunc(maps.Keys(byLocality), func(a, b PriorityLocality) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), CompareLocality(a.Locality, b.Locality))
	})
	groups := make([]localityGroup, len(keys))
	for i, k := range keys {
		groups[i] = localityGroup{priority: k.Priority, locality: k.Locality, endpoints: byLocality[k]}
	}
	return groups
}

// CompareLocality orders localities by region, zone and sub-zone.
func CompareLocality(a, b Locality) int {
	return cmp.Or(cmp.Compare(a.Region, b.Region), cmp.Compare(a.Zone, b.Zone), cmp.Compare(a.SubZone, b.SubZone))
}

// localityEndpoints translates one locality group with the given locality
// weight (>= 1).
func localityEndpoints(g localityGroup, weight uint32) (*endpointv3.LocalityLbEndpoints, error) {
	raw := make([]uint64, len(g.endpoints))
	for i, e := range g.endpoints {
		raw[i] = uint64(e.Weight)
	}
	weights, err := fitWeights(raw)
	if err != nil {
		return nil, fmt.Errorf("locality %+v: %w", g.locality, err)
	}
	lle := &endpointv3.LocalityLbEndpoints{
		Locality: &corev3.Locality{
			Region:  g.locality.Region,
			Zone:    g.locality.Zone,
			SubZone: g.locality.SubZone,
		},
		LoadBalancingWeight: wrapperspb.UInt32(weight),
		Priority:            g.priority,
		LbEndpoints:         make([]*endpointv3.LbEndpoint, len(g.endpoints)),
	}
	for i, e := range g.endpoints {
		lle.LbEndpoints[i] = lbEndpoint(e, weights[i])
	}
	return lle, nil
}

// clusterStampMeta is the locality metadata that carries a cluster
// stamp (Service.ClusterStamp); nil for none. Localities share it: it is
// only read.
func clusterStampMeta(stamp string) *corev3.Metadata {
	if stamp == "" {
		return nil
	}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		MetadataNamespace: {Fields: map[string]*structpb.Value{"cluster": structpb.NewStringValue(stamp)}},
	}}
}

// lbEndpoint translates one validated endpoint with the given weight (>= 1).
func lbEndpoint(e Endpoint, weight uint32) *endpointv3.LbEndpoint {
	return &endpointv3.LbEndpoint{
		HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Protocol:      corev3.SocketAddress_TCP,
				Address:       e.Address,
				PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: e.Port},
			}}},
			Hostname: e.ID,
		}},
		HealthStatus:        healthStatuses[e.Health],
		LoadBalancingWeight: wrapperspb.UInt32(weight),
		Metadata:            endpointMetadata(e),
	}
}

// endpointMetadata returns the filter metadata of e, or nil when it has
// no ID, Datacenter or Meta. Struct fields are a map; deterministic marshaling
// sorts its keys.
func endpointMetadata(e Endpoint) *corev3.Metadata {
	if e.ID == "" && e.Datacenter == "" && len(e.Meta) == 0 {
		return nil
	}
	fields := make(map[string]*structpb.Value, len(e.Meta)+2)
	for k, v := range e.Meta {
		fields[k] = structpb.NewStringValue(v)
	}
	if e.ID != "" {
		fields["id"] = structpb.NewStringValue(e.ID)
	}
	if e.Datacenter != "" {
		fields["datacenter"] = structpb.NewStringValue(e.Datacenter)
	}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		MetadataNamespace: {Fields: fields},
	}}
}
