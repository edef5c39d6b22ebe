package translate

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/subsetting"
)

// ServiceSettings are the per-service knobs from configuration.
type ServiceSettings struct {
	LBPolicy       envoy.LBPolicy // "" means round_robin
	ConnectTimeout time.Duration  // 0 means 1s
	// SubsetSize is how many endpoints of the service each node gets
	// (plus replacements for members that are not serving); 0 means all.
	SubsetSize int
	Subsetting subsetting.Algorithm // "" means steady
	// Cluster are the optional cluster settings (protocol, health checks,
	// outlier detection, circuit breakers, locality weights, ring size).
	Cluster envoy.ClusterOptions
	// Locality is how a node's locality orders the endpoints into
	// priorities (zero: every endpoint at priority 0, as without it).
	Locality LocalityPolicy
	// OverprovisioningFactor is the load assignments'
	// overprovisioning_factor in percent; 0 leaves Envoy's default (140).
	OverprovisioningFactor uint32
	// KeepUnhealthySplits keeps a split's share on a target without a
	// serving endpoint (services.<name>.unhealthy_split keep); by default
	// the share goes to the split's other targets.
	KeepUnhealthySplits bool
	// RetryOtherSplit sends a split route's retries to the split's other
	// targets (services.<name>.retry_other_split; see Expansion.Aggregates).
	RetryOtherSplit bool
}

// SettingsFunc returns the settings for a service (the "*" defaults merged
// with the service's own).
type SettingsFunc func(service string) ServiceSettings

// Service converts a discovered service into translation input: every
// registered endpoint, with its discovery health mapped to an EDS health
// status, and its weight from weights (endpoint id -> EDS weight, from
// utilization reports) where it has one, else from discovery.
//
// Endpoints come out sorted by id whatever their input order (sources
// emit them sorted; this makes sure), so replicas whose discovery listed
// them differently still send byte-identical load assignments.
func Service(svc discovery.Service, set ServiceSettings, weights map[string]uint32) envoy.Service {
	src := svc.Endpoints
	byID := func(a, b discovery.Endpoint) int { return strings.Compare(a.ID, b.ID) }
	if !slices.IsSortedFunc(src, byID) {
		src = slices.Clone(src)
		slices.SortStableFunc(src, byID)
	}
	eps := make([]envoy.Endpoint, 0, len(src))
	for _, ep := range src {
		eps = append(eps, envoy.Endpoint{
			ID:      ep.ID,
			Address: ep.Address,
			Port:    uint32(ep.Port),
			Health:  HealthStatus(ep.Health),
			Weight:  cmp.Or(weights[ep.ID], ep.Weight),
			Locality: envoy.Locality{
				Region: ep.Locality.Region, Zone: ep.Locality.Zone, SubZone: ep.Locality.SubZone,
			},
			Meta:       endpointMeta(ep),
			Datacenter: ep.Datacenter,
		})
	}
	return envoy.Service{
		Name:           svc.Name,
		LBPolicy:       set.LBPolicy,
		ConnectTimeout: set.ConnectTimeout,
		Endpoints:      eps,
		Cluster:        set.Cluster,

		OverprovisioningFactor: set.OverprovisioningFactor,
		ClusterStamp:           ClusterStamp(set),
	}
}

// ClusterStamp fingerprints what of set makes a service's cluster (its
// load balancing policy, connect timeout and cluster options): 16 hex
// digits of FNV-1a over their printed values, which hold no maps, so
// equal settings print equal (see envoy.Service.ClusterStamp).
func ClusterStamp(set ServiceSettings) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%d|%+v", set.LBPolicy, set.ConnectTimeout, set.Cluster)
	return fmt.Sprintf("%016x", h.Sum64())
}

// endpointMeta is the metadata sent with an endpoint: its discovery meta,
// plus "drain" (why it is DRAINING: discovery.Endpoint.Drain) when it is.
func endpointMeta(ep discovery.Endpoint) map[string]string {
	if ep.Drain == "" {
		return ep.Meta
	}
	m := make(map[string]string, len(ep.Meta)+1)
	maps.Copy(m, ep.Meta)
	m["drain"] = ep.Drain
	return m
}

// HealthStatus maps a discovery health to the EDS health status.
func HealthStatus(h discovery.Health) envoy.HealthStatus {
	switch h {
	case discovery.HealthHealthy:
		return envoy.HealthHealthy
	case discovery.HealthDegraded:
		return envoy.HealthDegraded
	case discovery.HealthUnhealthy:
		return envoy.HealthUnhealthy
	case discovery.HealthDraining:
		return envoy.HealthDraining
	default:
		return envoy.HealthUnknown
	}
}
