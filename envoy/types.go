package envoy

import "time"

// HealthStatus is the EDS health status of an endpoint.
type HealthStatus int

// Health statuses, mapped one to one onto envoy.config.core.v3.HealthStatus.
const (
	HealthUnknown HealthStatus = iota
	HealthHealthy
	HealthUnhealthy
	HealthDraining
	HealthDegraded
)

// Locality is the region/zone/sub-zone of an endpoint; all may be empty.
type Locality struct {
	Region  string
	Zone    string
	SubZone string
}

// Endpoint is one address of a service as a node should see it.
type Endpoint struct {
	Address  string       // IP or host name
	Port     uint32       // in [1, 65535]
	Health   HealthStatus // EDS health_status
	Weight   uint32       // load_balancing_weight; 0 is sent as 1
	Locality Locality
	Meta     map[string]string // sent as filter metadata under "xds-server"; may be nil
	ID       string            // endpoint id, sent as filter metadata "id" (and hostname for debugging)
	// Datacenter is where the endpoint was discovered, sent as filter
	// metadata "datacenter" when set; "" means unknown (or the only one).
	Datacenter string
	// Priority is the EDS priority level: 0 first, then 1 when 0 cannot
	// take the load. The priorities of a service's endpoints must be
	// contiguous from 0 (grpc-go rejects a gap).
	Priority uint32
}

// PriorityLocality is a locality at one priority level.
type PriorityLocality struct {
	Priority uint32
	Locality Locality
}

// LBPolicy names a cluster load-balancing policy.
type LBPolicy string

// Supported policies (the ones both Envoy and grpc-go understand, plus
// random and maglev for Envoy).
const (
	RoundRobin   LBPolicy = "round_robin"
	LeastRequest LBPolicy = "least_request"
	RingHash     LBPolicy = "ring_hash"
	Random       LBPolicy = "random"
	Maglev       LBPolicy = "maglev"
)

// Service is everything the translation needs to know about one service
// for one node.
type Service struct {
	Name           string         // cluster, listener, route and EDS resource name
	LBPolicy       LBPolicy       // "" means round_robin
	ConnectTimeout time.Duration  // > 0; 0 means 1s
	Endpoints      []Endpoint     // in the order they should appear; grouped by locality on output
	Cluster        ClusterOptions // protocol, health checks, outlier detection, circuit breakers...
	// LocalityWeights sets the weight (>= 1) of the localities listed,
	// in place of the sum of their serving endpoints' weights; nil for
	// none (see LoadAssignment).
	LocalityWeights map[PriorityLocality]uint32
	// OverprovisioningFactor is the load assignment's
	// overprovisioning_factor, in percent (Envoy moves traffic to the next
	// priority once healthy hosts x factor fall below 100%); 0 leaves it
	// unset (Envoy's default, 140).
	OverprovisioningFactor uint32
	// ClusterStamp, when set, is a fingerprint of the cluster's
	// definition that every locality of the load assignment carries
	// (metadata xds-server.cluster), so that a changed cluster changes its
	// load assignment too: Envoy replaces a changed cluster by one that
	// warms until it gets its load assignment again, and an unchanged one
	// would not be sent (initial_fetch_timeout: 15 s without traffic).
	ClusterStamp string
}
