package translate

import (
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/xds-server/xds-server/envoy"
)

// Resources are the four resources of one service: its cluster, its load
// assignment, and the api_listener and route configuration proxyless gRPC
// reaches it through (Envoy nodes get only the first two).
type Resources struct {
	Cluster, LoadAssignment, Listener, Route types.Resource
}

// ServiceResources translates one service into its resources; each is
// validated by its envoy constructor.
func ServiceResources(s envoy.Service) (Resources, error) {
	var out Resources
	var err error
	if out.Cluster, err = envoy.Cluster(s); err != nil {
		return out, err
	}
	if out.LoadAssignment, err = envoy.LoadAssignment(s); err != nil {
		return out, err
	}
	if out.Listener, err = envoy.Listener(s); err != nil {
		return out, err
	}
	if out.Route, err = envoy.RouteConfig(s); err != nil {
		return out, err
	}
	return out, nil
}

// WithWeights returns s serving eps (a subset of its endpoints, or all of
// them) with the weights w (endpoint id -> weight >= 1) where w has one;
// other endpoints keep theirs. s is not modified.
func WithWeights(s envoy.Service, eps []envoy.Endpoint, w map[string]uint32) envoy.Service {
	s.Endpoints = make([]envoy.Endpoint, len(eps))
	for k, ep := range eps {
		if x, ok := w[ep.ID]; ok && x > 0 {
			ep.Weight = x
		}
		s.Endpoints[k] = ep
	}
	return s
}
