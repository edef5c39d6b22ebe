package discovery

import (
	"cmp"
	"slices"
	"strings"

	"github.com/hashicorp/consul/api"
)

// This file holds the pure parts of the Consul source: health mapping and
// the conversion of health entries to endpoints (the blocking-query index
// rules and retry backoff are consulstate's). None of it does I/O, logs or
// keeps state.

// Maintenance check ids set by Consul's maintenance mode.
const (
	nodeMaintenanceCheck     = "_node_maintenance"
	serviceMaintenancePrefix = "_service_maintenance:"
)

// ReplicaCheckPrefix starts the id of the node-level alive check each
// xds-server replica keeps on its Consul agent (ha.AliveCheckPrefix). It
// says whether that replica runs, not whether the node's services do: a
// replica killed with -9 leaves it critical, which must not make every
// service on the node UNHEALTHY. Health mapping ignores these checks.
const ReplicaCheckPrefix = "xds-server-ha:"

// consulHealth maps the checks of one service instance to a health state and
// an endpoint weight (0: unset, meaning 1). Precedence, highest first:
//   - node or service maintenance (a check "_node_maintenance" or
//     "_service_maintenance:<service id>", or any check in status
//     "maintenance"): HealthDraining, weight 0 — kept, not removed;
//   - any critical check (or an unknown status): HealthUnhealthy, weight 0;
//   - any warning: HealthHealthy with svc.Weights.Warning, or HealthDegraded
//     (with the same weight) when warningAs is HealthDegraded;
//   - otherwise (also without checks): HealthHealthy with svc.Weights.Passing.
//
// Node-level checks of xds-server replicas (ReplicaCheckPrefix) are left
// out. Negative weights are treated as 0. svc may be nil.
func consulHealth(svc *api.AgentService, checks api.HealthChecks, warningAs Health) (Health, uint32) {
	var w api.AgentWeights
	serviceID := ""
	if svc != nil {
		w, serviceID = svc.Weights, svc.ID
	}
	critical, warning := false, false
	for _, c := range checks {
		if c == nil || (c.ServiceID == "" && strings.HasPrefix(c.CheckID, ReplicaCheckPrefix)) {
			continue
		}
		if c.CheckID == nodeMaintenanceCheck || c.CheckID == serviceMaintenancePrefix+serviceID || c.Status == api.HealthMaint {
			return HealthDraining, 0
		}
		switch c.Status {
		case api.HealthPassing:
		case api.HealthWarning:
			warning = true
		default: // critical, or a status this code does not know: fail closed
			critical = true
		}
	}
	switch {
	case critical:
		return HealthUnhealthy, 0
	case warning && warningAs == HealthDegraded:
		return HealthDegraded, consulWeight(w.Warning)
	case warning:
		return HealthHealthy, consulWeight(w.Warning)
	}
	return HealthHealthy, consulWeight(w.Passing)
}

func consulWeight(w int) uint32 {
	return uint32(min(max(w, 0), 1<<31))
}

// consulEndpoints converts the entries of one health query to raw
// (not yet normalized) endpoints. Entries without a service, or not carrying
// all of tags, are left out. An endpoint's ID is the Consul service ID; when
// several nodes register the same service ID, every one of those endpoints is
// named "<node>/<service id>" instead, so the choice does not depend on order.
// The address is the service address, or the node address when empty.
// The datacenter is the node's, else datacenter (the one queried); it
// fills the locality's region when the service gives none.
func consulEndpoints(entries []*api.ServiceEntry, tags []string, warningAs Health, datacenter string) []Endpoint {
	kept := make([]*api.ServiceEntry, 0, len(entries))
	perID := map[string]int{}
	for _, e := range entries {
		if e != nil && e.Service != nil && hasAllTags(e.Service.Tags, tags) {
			kept = append(kept, e)
			perID[e.Service.ID]++
		}
	}
	eps := make([]Endpoint, 0, len(kept))
	for _, e := range kept {
		node, s := e.Node, e.Service
		if node == nil {
			node = &api.Node{}
		}
		id := s.ID
		if perID[id] > 1 {
			id = node.Node + "/" + s.ID
		}
		h, w := consulHealth(s, e.Checks, warningAs)
		drain := ""
		if h == HealthDraining {
			drain = DrainConsul
		}
		dc := cmp.Or(node.Datacenter, datacenter)
		eps = append(eps, Endpoint{
			ID:         id,
			Address:    cmp.Or(s.Address, node.Address),
			Port:       s.Port,
			Health:     h,
			Weight:     w,
			Locality:   LocalityFrom(s.Meta, s.Tags, dc),
			Meta:       s.Meta,
			Tags:       s.Tags,
			Node:       node.Node,
			Drain:      drain,
			Datacenter: dc,
		})
	}
	return eps
}

// consulServiceNames filters the result of a catalog service listing (name
// to the union of the tags of its instances) and returns the names to watch,
// sorted: never "consul"; only names in only (when not empty); only services
// whose tags include all of tags.
func consulServiceNames(catalog map[string][]string, only, tags []string) []string {
	names := make([]string, 0, len(catalog))
	for name, have := range catalog {
		if name == "consul" || (len(only) > 0 && !slices.Contains(only, name)) || !hasAllTags(have, tags) {
			continue
		}
		names = append(names, name)
	}
	slices.SortFunc(names, strings.Compare)
	return names
}

// hasAllTags reports whether have contains every element of want.
func hasAllTags(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
