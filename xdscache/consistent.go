package xdscache

import (
	"fmt"
	"slices"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
)

// Consistent checks that a snapshot is self-contained: go-control-plane's
// Consistent() for everything it understands, plus the Listener -> Route
// references of api_listeners, which Consistent() (v0.14) does not follow:
// it counts only routes referenced from filter chains, so it reports every
// RouteConfiguration used by a proxyless gRPC api_listener as unreferenced.
func Consistent(s *cache.Snapshot) error {
	if s.Resources[types.Listener].Items == nil && s.Resources[types.Route].Items == nil {
		return s.Consistent()
	}
	// Clusters and endpoints (and anything else but LDS/RDS) through the
	// library's own check.
	rest := &cache.Snapshot{Resources: s.Resources}
	rest.Resources[types.Listener], rest.Resources[types.Route] = cache.Resources{}, cache.Resources{}
	if err := rest.Consistent(); err != nil {
		return err
	}
	refs := map[string]bool{}
	for name, r := range s.Resources[types.Listener].Items {
		l, ok := r.Resource.(*listenerv3.Listener)
		if !ok {
			return fmt.Errorf("listener %q: unexpected type %T", name, r.Resource)
		}
		routes, err := routeRefs(l)
		if err != nil {
			return err
		}
		for _, rt := range routes {
			refs[rt] = true
		}
	}
	routes := s.Resources[types.Route].Items
	var missing, unused []string
	for rt := range refs {
		if _, ok := routes[rt]; !ok {
			missing = append(missing, rt)
		}
	}
	for rt := range routes {
		if !refs[rt] {
			unused = append(unused, rt)
		}
	}
	if len(missing)+len(unused) > 0 {
		slices.Sort(missing)
		slices.Sort(unused)
		return fmt.Errorf("route configurations referenced but missing %v, present but unreferenced %v", missing, unused)
	}
	return nil
}

// routeRefs returns the RDS route names a listener refers to, from its
// api_listener and from its filter chains.
func routeRefs(l *listenerv3.Listener) ([]string, error) {
	var out []string
	if api := l.GetApiListener().GetApiListener(); api != nil {
		var hcm hcmv3.HttpConnectionManager
		if err := api.UnmarshalTo(&hcm); err != nil {
			return nil, fmt.Errorf("listener %q: api_listener: %w", l.GetName(), err)
		}
		if n := hcm.GetRds().GetRouteConfigName(); n != "" {
			out = append(out, n)
		}
	}
	refs := cache.GetResourceReferences(map[string]types.ResourceWithTTL{l.GetName(): {Resource: l}})
	for n := range refs["type.googleapis.com/envoy.config.route.v3.RouteConfiguration"] {
		out = append(out, n)
	}
	return out, nil
}
