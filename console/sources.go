package console

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/drain"
	"github.com/xds-server/xds-server/policy"
	"github.com/xds-server/xds-server/ratelimit"
	"github.com/xds-server/xds-server/weights"
	"github.com/xds-server/xds-server/xds"
)

// Fleet is what the console reads of the xDS server (*xds.Server): the
// nodes, and a service's subsets in brief (connections per endpoint, at
// most maxNodes node ids), for one node, and one node's priority levels.
type Fleet interface {
	Nodes() []xds.Node
	SubsetSummary(service string, maxNodes int) (xds.SubsetSummary, bool)
	SubsetOf(service, node string) (xds.SubsetNode, bool)
	// LevelsOf is a node's priority levels of a service with a locality
	// policy (false for one without).
	LevelsOf(service, node string) (xds.ServiceLevels, bool)
}

// Weights is the weight table as last computed (*weights.Pipeline).
type Weights interface {
	Table() weights.Table
}

// Drains is the drain state (*drain.Manager).
type Drains interface {
	State() drain.State
}

// Rules is the rate-limit configuration in use (*ratelimit.Service).
type Rules interface {
	Config() *ratelimit.Config
}

// Gatherer reads the process's metrics (push latency, NACKs, discovery
// state); *prometheus.Registry is one.
type Gatherer = prometheus.Gatherer

// Policies is the traffic policy read from Consul's config entries
// (*policy.Watcher): a service's effective policy and the entries whose
// current version is rejected.
type Policies interface {
	Policy(service string) policy.Policy
	Rejections() []policy.Rejection
}
