package xds

import (
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/xds-server/xds-server/discovery"
)

// routeCheck watches the services the configured listeners route to.
// Used by the reconcile loop only.
type routeCheck struct {
	lis     *listenerSet // nil when there are no listeners
	m       *metrics
	log     *slog.Logger
	unknown map[string]bool // routed services without instances, as last logged
}

// check sets xds_route_unknown_service for every service the listeners
// route to: the number of routes to it while discovery has no instance of
// it, else 0. A service that becomes unknown is logged once as a warning
// (and its return once at info): its routes answer 503 meanwhile, as Envoy
// does for a cluster without endpoints.
func (r *routeCheck) check(in discovery.Snapshot) {
	if r.lis == nil || len(r.lis.targets) == 0 {
		return
	}
	has := make(map[string]bool, len(in.Services))
	for _, svc := range in.Services {
		if len(svc.Endpoints) > 0 {
			has[svc.Name] = true
		}
	}
	if r.unknown == nil {
		r.unknown = map[string]bool{}
	}
	for _, service := range slices.Sorted(maps.Keys(r.lis.targets)) {
		unknown := !has[service]
		n := 0
		if unknown {
			n = r.lis.targets[service]
		}
		r.m.unknownRoute.WithLabelValues(service).Set(float64(n))
		was, seen := r.unknown[service]
		switch {
		case unknown && (!seen || !was):
			r.log.Warn("listener routes point at a service with no instances; they answer 503 until it has some",
				"service", service, "routes", n)
		case !unknown && seen && was:
			r.log.Info("routed service has instances again", "service", service)
		}
		r.unknown[service] = unknown
	}
}

// withRouted returns in plus, for every service a listener routes to that
// in lacks, that service without endpoints (after in's). The cluster of a
// routed service thus exists as long as a route points at it: a service
// that comes or goes only fills or empties its load assignment, and Envoy,
// which answers 503 for lack of a cluster (NC) while a route names a
// cluster it does not have or still warms, answers "no healthy upstream"
// (UH) instead while the service has no instances.
func (s *listenerSet) withRouted(in discovery.Snapshot) discovery.Snapshot {
	if s == nil || len(s.targets) == 0 {
		return in
	}
	missing := maps.Clone(s.targets)
	for _, svc := range in.Services {
		delete(missing, svc.Name)
	}
	if len(missing) == 0 {
		return in
	}
	out := slices.Grow(slices.Clone(in.Services), len(missing))
	for name := range missing {
		out = append(out, discovery.Service{Name: name})
	}
	slices.SortFunc(out, func(a, b discovery.Service) int { return strings.Compare(a.Name, b.Name) }) // a Snapshot's services are sorted by name
	return discovery.Snapshot{Services: out}
}
