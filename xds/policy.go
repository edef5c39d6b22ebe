package xds

import (
	"maps"
	"reflect"
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
// "<service>~<subset>", a service with a policy gets its routes, and so
// do the configured listeners' routes to it (see translate.Expand and
// envoy.ApplyPolicyRoutes). Nodes are updated by the reconcile loop after
// the debounce, as for Update.
func (s *Server) SetPolicies(p map[string]policy.Policy) {
	s.rec.redo(func() { s.rec.pols = p })
}

// expand serves the snapshot under the policies: the expansion, the
// aggregate clusters and the listeners' routes; what cannot be served is
// logged (once per change of its error) and counted.
func (r *reconciler) expand(in discovery.Snapshot, pols map[string]policy.Policy) translate.Expansion {
	now := r.now()
	r.hold.begin()
	exp := translate.Expand(translate.ExpandInput{Snapshot: in, Policies: pols, Settings: r.settings,
		Demanded: r.lis.demanded(), Prev: r.lastExp, RouteServing: r.hold.routeServing(now),
		LocalDatacenter: r.sub.local.defaultDC})
	r.lastExp = &exp
	if next := r.hold.end(&exp, now); !next.IsZero() {
		r.linger.schedule(next, now, func() { r.redo(func() {}) })
	}
	errs := make(map[string]string, len(exp.Errors))
	for name, err := range exp.Errors {
		errs[name] = err.Error()
	}
	r.aggs = r.linger.apply(&exp, aggregates(exp, errs), now, func() { r.redo(func() {}) })
	r.served = withPolicies(r.lis, exp.Routes, errs)
	prev := r.policyErrs
	r.policyErrs = map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(errs)) {
		r.notePolicyErr(name, errs[name], prev)
	}
	r.m.policyUnserved.Set(float64(len(r.policyErrs)))
	return exp
}

// notePolicyErr records that name's policy is not served, logging it
// unless prev already had the same error.
func (r *reconciler) notePolicyErr(name, msg string, prev map[string]string) {
	if prev[name] != msg {
		r.log.Error("traffic policy not served; served without it", "name", name, "error", msg)
	}
	r.policyErrs[name] = msg
	r.m.policyUnserved.Set(float64(len(r.policyErrs)))
}

// policyRoute is the route item of a service with a policy; ok is false
// for one without (or when its routes do not translate: noted).
func (r *reconciler) policyRoute(exp translate.Expansion, name string) (xdscache.Item, bool) {
	routes, ok := exp.Routes[name]
	if !ok {
		return xdscache.Item{}, false
	}
	if m, ok := r.routeMemo[name]; ok && reflect.DeepEqual(m.routes, routes) {
		r.routeNext[name] = m
		return m.item, true
	}
	rc, err := envoy.PolicyRouteConfig(name, routes)
	if err == nil {
		var it xdscache.Item
		if it, err = xdscache.NewItem(name, rc); err == nil {
			r.routeNext[name] = routeMemo{routes: routes, item: it}
			return it, true
		}
	}
	r.notePolicyErr(name, err.Error(), r.policyErrs)
	return xdscache.Item{}, false
}

// routeMemo is a policy route item and the routes it was built from.
type routeMemo struct {
	routes []envoy.PolicyRoute
	item   xdscache.Item
}

// aggregates builds the expansion's aggregate clusters; one that fails
// (validation rules it out) is left out and noted in errs.
func aggregates(exp translate.Expansion, errs map[string]string) []xdscache.Item {
	var out []xdscache.Item
	for _, name := range slices.Sorted(maps.Keys(exp.Aggregates)) {
		c, err := envoy.AggregateCluster(exp.Aggregates[name], exp.AggregateBreakers(name))
		var it xdscache.Item
		if err == nil {
			it, err = xdscache.NewItem(name, c)
		}
		if err != nil {
			errs[name] = err.Error()
			continue
		}
		out = append(out, it)
	}
	return out
}

// withPolicies returns the listener set with its routes to services with
// a policy replaced by the policy's (translate.ListenerRoute); a route
// that cannot take them is served as configured and noted in errs. s
// itself stays as configured.
func withPolicies(s *listenerSet, routes map[string][]envoy.PolicyRoute, errs map[string]string) *listenerSet {
	if s == nil || len(routes) == 0 {
		return s
	}
	out := *s
	out.ls = slices.Clone(s.ls)
	for i, l := range out.ls {
		rc, err := translate.ListenerRoute(l.routeRes, routes)
		if err == nil && rc != l.routeRes {
			var it xdscache.Item
			if it, err = xdscache.NewItem(rc.GetName(), rc); err == nil {
				out.ls[i].route = it
			}
		}
		if err != nil {
			errs["listener "+l.route.Name] = err.Error()
		}
	}
	return &out
}

// base builds the shared snapshot of an assembly key from the services'
// items, the configured listeners' resources (with the policies' routes)
// and the aggregate clusters.
func (r *reconciler) base(key string, items []xdscache.ServiceItems) (*cache.Snapshot, error) {
	ex, n, err := r.served.forKey(key)
	if err != nil {
		return nil, err
	}
	ex[xdscache.CDS] = append(ex[xdscache.CDS], r.aggs...)
	return xdscache.NewSnapshot(items, n, &ex)
}

// PolicyErrors are the services (and listeners, "listener <name>";
// clusters of undefined subsets) whose traffic policy is not served, with
// why, as of the latest reconcile pass.
func (s *Server) PolicyErrors() map[string]string {
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	return maps.Clone(s.rec.policyErrs)
}
