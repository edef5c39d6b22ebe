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
//   - endpoints are grouped by locality, localities sorted by region, zone
//     and sub-zone, endpoints of a locality in input order, all at priority 0;
//   - every group carries a locality message, even when all its fields are
//     empty (grpc-go NACKs a group without one);
//   - endpoint weights are Endpoint.Weight, 0 sent as 1; a locality whose
//     weights sum to 2^32-1 or more has them scaled down (see fitWeights);
//   - a locality's weight is the sum of the input weights (0 counted as 1)
//     of its serving endpoints (healthy, degraded or unknown), or 1 when none
//     serves, so a locality's share follows the capacity that can take
//     requests; scaled down the same way when the localities' sum would
//     reach 2^32-1, every weight staying >= 1;
//   - hostname is Endpoint.ID, and filter_metadata[MetadataNamespace] holds
//     the Meta entries plus "id" (the ID wins over a Meta key "id"; no "id"
//     when ID is empty; no metadata when both are empty).
//
// A service without endpoints gives a load assignment without endpoints.
func LoadAssignment(s Service) (*endpointv3.ClusterLoadAssignment, error) {
	if err := errors.Join(validateName(s), validateEndpoints(s)); err != nil {
		return nil, err
	}
	groups := groupByLocality(s.Endpoints)
	raw := make([]uint64, len(groups))
	for i, g := range groups {
		for _, e := range g.endpoints {
			if e.Health.serving() {
				raw[i] += uint64(max(e.Weight, 1))
			}
		}
		raw[i] = max(raw[i], 1)
	}
	weights, err := fitWeights(raw)
	if err != nil {
		return nil, fmt.Errorf("envoy: load assignment %q: locality weights: %w", s.Name, err)
	}
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: s.Name}
	for i, g := range groups {
		lle, err := localityEndpoints(g, weights[i])
		if err != nil {
			return nil, fmt.Errorf("envoy: load assignment %q: %w", s.Name, err)
		}
		cla.Endpoints = append(cla.Endpoints, lle)
	}
	return validated(cla, "load assignment", s.Name)
}

// localityGroup is the endpoints of one locality, in input order.
type localityGroup struct {
	locality  Locality
	endpoints []Endpoint
}

// groupByLocality groups eps by locality, sorted by region, zone and
// sub-zone; each group keeps the input order of its endpoints.
func groupByLocality(eps []Endpoint) []localityGroup {
	byLocality := make(map[Locality][]Endpoint)
	for _, e := range eps {
		byLocality[e.Locality] = append(byLocality[e.Locality], e)
	}
	localities := slices.SortedFunc(maps.Keys(byLocality), func(a, b Locality) int {
		return cmp.Or(cmp.Compare(a.Region, b.Region), cmp.Compare(a.Zone, b.Zone), cmp.Compare(a.SubZone, b.SubZone))
	})
	groups := make([]localityGroup, len(localities))
	for i, l := range localities {
		groups[i] = localityGroup{locality: l, endpoints: byLocality[l]}
	}
	return groups
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
		LbEndpoints:         make([]*endpointv3.LbEndpoint, len(g.endpoints)),
	}
	for i, e := range g.endpoints {
		lle.LbEndpoints[i] = lbEndpoint(e, weights[i])
	}
	return lle, nil
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
// neither an ID nor Meta. Struct fields are a map; deterministic marshaling
// sorts its keys.
func endpointMetadata(e Endpoint) *corev3.Metadata {
	if e.ID == "" && len(e.Meta) == 0 {
		return nil
	}
	fields := make(map[string]*structpb.Value, len(e.Meta)+1)
	for k, v := range e.Meta {
		fields[k] = structpb.NewStringValue(v)
	}
	if e.ID != "" {
		fields["id"] = structpb.NewStringValue(e.ID)
	}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		MetadataNamespace: {Fields: fields},
	}}
}
