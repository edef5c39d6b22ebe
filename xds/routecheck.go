package xds

import (
	"log/slog"
	"maps"
	"slices"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/translate"
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

// demanded lists the (service, subset) targets the listeners' split
// routes send to.
func (s *listenerSet) demanded() []translate.Target {
	if s == nil {
		return nil
	}
	return s.splits
}

// withRouted returns in plus the services the listeners route to that in
// lacks, without endpoints (translate.Routed).
func (s *listenerSet) withRouted(in discovery.Snapshot) discovery.Snapshot {
	if s == nil {
		return in
	}
	return translate.Routed(in, s.targets)
}
