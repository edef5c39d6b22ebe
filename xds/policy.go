package xds

import (
	"maps"
	"slices"

	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/policy"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/xdscache"
)

// SetPolicies replaces the services' traffic policies (service -> policy;
// absent: none). Each (service, subset) target a policy uses is served
// as a cluster and load assignment of its own, named
// "<service>~<subset>", and a service with a policy gets its routes (see
// translate.Expand). Nodes are updated by the reconcile loop after the
// debounce, as for Update.
func (s *Server) SetPolicies(p map[string]policy.Policy) {
	s.rec.redo(func() { s.rec.pols = p })
}

// expand serves the snapshot under the policies, logging and counting
// what cannot be served (once per change of its error).
func (r *reconciler) expand(in discovery.Snapshot, pols map[string]policy.Policy) translate.Expansion {
	exp := translate.Expand(translate.ExpandInput{Snapshot: in, Policies: pols, Settings: r.settings,
		Demanded: r.lis.demanded()})
	seen := make(map[string]string, len(exp.Errors))
	for _, name := range slices.Sorted(maps.Keys(exp.Errors)) {
		msg := exp.Errors[name].Error()
		seen[name] = msg
		if r.policyErrs[name] != msg {
			r.log.Error("traffic policy not served; the service is served without it", "service", name, "error", msg)
		}
	}
	r.policyErrs = seen
	r.aggs = r.aggregates(exp)
	r.m.policyUnserved.Set(float64(len(r.policyErrs)))
	return exp
}

// aggregates builds the expansion's aggregate clusters (a failure, which
// validation rules out, leaves the aggregate out and is logged).
func (r *reconciler) aggregates(exp translate.Expansion) []xdscache.Item {
	var out []xdscache.Item
	for _, name := range slices.Sorted(maps.Keys(exp.Aggregates)) {
		c, err := envoy.AggregateCluster(exp.Aggregates[name])
		var it xdscache.Item
		if err == nil {
			it, err = xdscache.NewItem(name, c)
		}
		if err != nil {
			r.policyErrs[name] = err.Error()
			r.log.Error("aggregate cluster not served", "cluster", name, "error", err)
			continue
		}
		out = append(out, it)
	}
	return out
}

// base builds the shared snapshot of an assembly key from the services'
// items, the configured listeners' resources and the aggregate clusters.
func (r *reconciler) base(key string, items []xdscache.ServiceItems) (*cache.Snapshot, error) {
	ex, n, err := r.lis.forKey(key)
	if err != nil {
		return nil, err
	}
	ex[xdscache.CDS] = append(ex[xdscache.CDS], r.aggs...)
	return xdscache.NewSnapshot(items, n, &ex)
}

// policyRoute is the route item of a service with a policy; ok is false
// for one without (or when its routes do not translate: logged).
func (r *reconciler) policyRoute(exp translate.Expansion, name string) (xdscache.Item, bool) {
	routes, ok := exp.Routes[name]
	if !ok {
		return xdscache.Item{}, false
	}
	rc, err := envoy.PolicyRouteConfig(name, routes)
	if err == nil {
		var it xdscache.Item
		if it, err = xdscache.NewItem(name, rc); err == nil {
			return it, true
		}
	}
	if r.policyErrs[name] == "" {
		r.policyErrs[name] = err.Error()
		r.m.policyUnserved.Set(float64(len(r.policyErrs)))
		r.log.Error("traffic policy routes not served; the service is served without them", "service", name, "error", err)
	}
	return xdscache.Item{}, false
}
