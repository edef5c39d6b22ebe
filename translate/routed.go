package translate

import (
	"maps"
	"slices"
	"strings"

	"github.com/xds-server/xds-server/discovery"
)

// RouteTargets counts the routes of the listeners per service they route
// to (a split route counts for each service it splits to; nil when there
// are none).
func RouteTargets(ls []Listener) map[string]int {
	var targets map[string]int
	for _, l := range ls {
		for _, r := range l.Routes {
			if targets == nil {
				targets = map[string]int{}
			}
			if r.Service != "" {
				targets[r.Service]++
			}
			seen := map[string]bool{}
			for _, c := range r.Split {
				if t := targetOf(c.Cluster); !seen[t.Service] {
					seen[t.Service] = true
					targets[t.Service]++
				}
			}
		}
	}
	return targets
}

// targetOf is the target whose cluster is named cluster (see
// Target.Cluster).
func targetOf(cluster string) Target {
	rest, dc, _ := strings.Cut(cluster, DatacenterSep)
	service, subset, _ := strings.Cut(rest, SubsetSep)
	return Target{Service: service, Subset: subset, Datacenter: dc}
}

// Demanded lists the (service, subset) targets the listeners' split
// routes send to.
func Demanded(ls []Listener) []Target {
	var out []Target
	for _, l := range ls {
		for _, r := range l.Routes {
			for _, c := range r.Split {
				if t := targetOf(c.Cluster); t.Subset != "" && !slices.Contains(out, t) {
					out = append(out, t)
				}
			}
		}
	}
	return out
}

// Routed returns in plus, for every service of targets (routed to by a
// listener) that in lacks, that service without endpoints, all sorted by
// name. The cluster of a routed service thus exists as long as a route
// points at it: a service that comes or goes only fills or empties its
// load assignment, and Envoy, which answers 503 for lack of a cluster (NC)
// while a route names a cluster it does not have or still warms, answers
// "no healthy upstream" (UH) instead while the service has no instances.
func Routed(in discovery.Snapshot, targets map[string]int) discovery.Snapshot {
	if len(targets) == 0 {
		return in
	}
	missing := maps.Clone(targets)
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
