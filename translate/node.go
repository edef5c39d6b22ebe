package translate

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/policy"
	"github.com/xds-server/xds-server/subsetting"
)

// NodeIdentity is who a node is, as far as its resources depend on it.
type NodeIdentity struct {
	ID      string
	Cluster string // its cluster (node.cluster); listeners' globs match it as well as ID
	// Envoy: an Envoy proxy (user agent "envoy"), which gets clusters,
	// load assignments and its configured listeners; otherwise proxyless
	// gRPC (or another client), which also gets an api_listener and a
	// route per service.
	Envoy bool
	// Index is the node's client index for subsetting; -1 means none yet
	// (the node gets every endpoint of subset services).
	Index    int
	Locality envoy.Locality // where the node runs (node.locality)
	// Datacenter is the node's datacenter (its metadata "datacenter",
	// else the server's local one); "" when unknown.
	Datacenter string
}

// Place is where the node runs, as its priorities depend on it.
func (n NodeIdentity) Place() Place {
	return Place{Datacenter: n.Datacenter, Region: n.Locality.Region, Zone: n.Locality.Zone}
}

// NodeInput is everything one node's resources are made of.
type NodeInput struct {
	// Snapshot is the discovery snapshot with the drains applied: a
	// drained endpoint is HealthDraining with its reasons in Drain.
	Snapshot discovery.Snapshot
	Settings SettingsFunc // per-service settings; nil means defaults for all
	// Weights are the global EDS weights: service -> endpoint id -> weight.
	Weights map[string]map[string]uint32
	// NodeWeights are the node's own: service -> endpoint id -> weight
	// (a service listed gets a load assignment of the node's own).
	NodeWeights map[string]map[string]uint32
	Node        NodeIdentity
	Listeners   []Listener // the configured listeners (all; Node picks the node's)
	// RateLimitAddress and RateLimitTLS make the RLS cluster of listeners
	// whose rate limit names no cluster (see RateLimitCluster).
	RateLimitAddress string
	RateLimitTLS     *envoy.RateLimitTLS
	// Slots are the endpoint slots of steady subset services as the slot
	// table holds them: service -> endpoint id -> slot. A service absent
	// gets FreshSlots (a table without history).
	Slots map[string]map[string]int
	// Datacenters is the datacenter failover order (the local one first),
	// for services with a datacenter failover level.
	Datacenters []string
	// Spill are the zone spill states of services with locality.spill:
	// service -> zone -> state.
	Spill map[string]map[Zone]ZoneSpill
	// Policies are the services' traffic policies (see Expand): their
	// targets are clusters of their own, with their service's weights.
	Policies map[string]policy.Policy
}

// NodeResources are what one node receives, each kind sorted by name.
type NodeResources struct {
	Clusters        []*clusterv3.Cluster
	LoadAssignments []*endpointv3.ClusterLoadAssignment
	Listeners       []*listenerv3.Listener
	Routes          []*routev3.RouteConfiguration
}

// Node translates one node's resources: per service (every service of
// the snapshot, and every service a listener routes to, empty if
// discovery lacks it), its cluster and load assignment (the node's pick
// of a subset service when it has a client index, with its own weights
// where it has them) and, for a proxyless node, its api_listener and
// route; then the configured listeners the node matches: Envoy's
// listener (and the RLS cluster when its rate limit uses it) for an
// Envoy node, the api_listener for another, and their routes. A
// configured listener's resources take the place of a service's of the
// same name and kind.
//
// It gives what a server that has no history gets; a server carries
// subset picks over from earlier snapshots where nothing they hold
// changed, and keeps endpoint slots over time (see Slots).
func Node(in NodeInput) (NodeResources, error) {
	var out NodeResources
	var local string
	if len(in.Datacenters) > 0 {
		local = in.Datacenters[0]
	}
	exp := Expand(ExpandInput{Snapshot: Routed(in.Snapshot, RouteTargets(in.Listeners)), Policies: in.Policies,
		Settings: in.Settings, Demanded: Demanded(in.Listeners), LocalDatacenter: local})
	ex, err := nodeListeners(in, exp.Routes)
	if err != nil {
		return out, err
	}
	for _, svc := range exp.Snapshot.Services {
		r, err := nodeService(in, svc, exp.Settings(svc.Name), in.Weights[exp.Parent(svc.Name)])
		if err != nil {
			return out, err
		}
		if routes, ok := exp.Routes[svc.Name]; ok {
			if rc, err := envoy.PolicyRouteConfig(svc.Name, routes); err == nil {
				r.Route = rc // else served without its policy's routes, as a server does
			}
		}
		out.Clusters = append(out.Clusters, r.Cluster.(*clusterv3.Cluster))
		out.LoadAssignments = append(out.LoadAssignments, r.LoadAssignment.(*endpointv3.ClusterLoadAssignment))
		if !in.Node.Envoy {
			out.Listeners = append(out.Listeners, r.Listener.(*listenerv3.Listener))
			out.Routes = append(out.Routes, r.Route.(*routev3.RouteConfiguration))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(exp.Aggregates)) {
		c, err := envoy.AggregateCluster(exp.Aggregates[name], exp.AggregateBreakers(name))
		if err != nil {
			return out, err
		}
		out.Clusters = append(out.Clusters, c)
	}
	out.Clusters = merged(out.Clusters, ex.Clusters, (*clusterv3.Cluster).GetName)
	out.LoadAssignments = merged(out.LoadAssignments, nil, (*endpointv3.ClusterLoadAssignment).GetClusterName)
	out.Listeners = merged(out.Listeners, ex.Listeners, (*listenerv3.Listener).GetName)
	out.Routes = merged(out.Routes, ex.Routes, (*routev3.RouteConfiguration).GetName)
	return out, consistentEDS(out)
}

// consistentEDS reports EDS clusters without their load assignment and
// load assignments no EDS cluster uses, which a server's snapshot check
// rejects (a service named like the RLS cluster loses its cluster to it).
// Listener to route references are consistent by construction: a
// configured listener brings its route, a service's api_listener comes
// and goes with its route.
func consistentEDS(res NodeResources) error {
	refs := map[string]bool{}
	for _, c := range res.Clusters {
		if c.GetType() == clusterv3.Cluster_EDS {
			refs[cmp.Or(c.GetEdsClusterConfig().GetServiceName(), c.GetName())] = true
		}
	}
	var unused []string
	for _, la := range res.LoadAssignments {
		if !refs[la.GetClusterName()] {
			unused = append(unused, la.GetClusterName())
		}
		delete(refs, la.GetClusterName())
	}
	var errs []error
	if len(refs) > 0 {
		errs = append(errs, fmt.Errorf("translate: EDS clusters without a load assignment: %v", slices.Sorted(maps.Keys(refs))))
	}
	if len(unused) > 0 {
		errs = append(errs, fmt.Errorf("translate: load assignments without an EDS cluster: %v", unused))
	}
	return errors.Join(errs...)
}

// merged returns the services' resources whose names no extra takes,
// plus the extras, sorted by name.
func merged[T any](services, extras []T, name func(T) string) []T {
	taken := make(map[string]bool, len(extras))
	for _, e := range extras {
		taken[name(e)] = true
	}
	out := slices.DeleteFunc(services, func(r T) bool { return taken[name(r)] })
	out = append(out, extras...)
	slices.SortStableFunc(out, func(a, b T) int { return strings.Compare(name(a), name(b)) })
	return out
}

// nodeService translates one service for the node: its shared resources
// with the load assignment the node gets.
// weights are the service's global weights.
func nodeService(in NodeInput, svc discovery.Service, set ServiceSettings, weights map[string]uint32) (Resources, error) {
	s := Service(svc, set, weights)
	r, err := ServiceResources(s)
	if err != nil {
		return r, err
	}
	own := in.NodeWeights[svc.Name]
	view := s
	switch {
	case set.Locality.On():
		if view, err = Localize(s, set, LocalizeInput{At: in.Node.Place(), Datacenters: in.Datacenters,
			Spill: in.Spill[svc.Name], Slots: in.Slots[svc.Name], Index: in.Node.Index}); err != nil {
			return r, err
		}
		if own != nil {
			view = WithWeights(view, view.Endpoints, own)
		}
	case in.Node.Index >= 0 && Subsetted(set.SubsetSize, len(svc.Endpoints)):
		if view, err = subsetFor(s, set, in.Slots[svc.Name], in.Node.Index); err != nil {
			return r, err
		}
		if own != nil {
			view = WithWeights(s, view.Endpoints, own)
		}
	case own != nil:
		view = WithWeights(s, s.Endpoints, own)
	default:
		return r, nil
	}
	if r.LoadAssignment, err = envoy.LoadAssignment(view); err != nil {
		return r, err
	}
	return r, nil
}

// subsetFor returns s serving the pick of client index i (see Pick), its
// endpoints in plan order. slots, for steady, are the endpoints' slots;
// nil means FreshSlots.
func subsetFor(s envoy.Service, set ServiceSettings, slots map[string]int, i int) (envoy.Service, error) {
	names := make([]string, len(s.Endpoints))
	for k, ep := range s.Endpoints {
		names[k] = ep.ID
	}
	switch {
	case !UsesSlots(set, len(s.Endpoints)):
		slots = nil
	case slots == nil:
		slots = FreshSlots(names)
	default:
		for _, id := range names {
			if _, ok := slots[id]; !ok {
				return s, fmt.Errorf("translate: subsets of %s: endpoint %q has no slot", s.Name, id)
			}
		}
	}
	plan, err := NewPlan(cmp.Or(set.Subsetting, subsetting.Steady), names, set.SubsetSize, slots)
	if err != nil {
		return s, fmt.Errorf("translate: subsets of %s: %w", s.Name, err)
	}
	arranged, serving, err := Arrange(s, plan)
	if err != nil {
		return s, err
	}
	return SubsetOf(arranged, Members(Pick(plan, serving, i))), nil
}

// ListenerRoute is a configured listener's route with its routes to
// services with a policy replaced by the policy's
// (envoy.ApplyPolicyRoutes); when they cannot be (the policy's routes
// do not validate there), the listener's route as configured, with the
// error.
func ListenerRoute(rc *routev3.RouteConfiguration, policies map[string][]envoy.PolicyRoute) (*routev3.RouteConfiguration, error) {
	if len(policies) == 0 {
		return rc, nil
	}
	applied, err := envoy.ApplyPolicyRoutes(rc, policies)
	if err != nil {
		return rc, fmt.Errorf("translate: route %q: %w", rc.GetName(), err)
	}
	return applied, nil
}

// nodeListeners returns the resources the configured listeners give the
// node (see Node), their routes to services with a policy replaced by the
// policy's (envoy.ApplyPolicyRoutes). Every listener is translated, so
// that a bad one is an error whichever node asks.
func nodeListeners(in NodeInput, policies map[string][]envoy.PolicyRoute) (NodeResources, error) {
	var ex NodeResources
	names := map[string]bool{}
	rls, anyRLS := false, false
	for _, l := range in.Listeners {
		b, err := BuildListener(l)
		if err != nil {
			return ex, err
		}
		if names[l.Name] {
			return ex, fmt.Errorf("translate: listener %q: duplicate name", l.Name)
		}
		names[l.Name] = true
		anyRLS = anyRLS || b.NeedsRLS
		if !Matches(b.Globs, in.Node.ID, in.Node.Cluster) {
			continue
		}
		if in.Node.Envoy {
			ex.Listeners = append(ex.Listeners, b.Envoy.(*listenerv3.Listener))
			rls = rls || b.NeedsRLS
		} else {
			ex.Listeners = append(ex.Listeners, b.API.(*listenerv3.Listener))
		}
		rc, _ := ListenerRoute(b.Route.(*routev3.RouteConfiguration), policies) // on an error, as configured: as a server does
		ex.Routes = append(ex.Routes, rc)
	}
	if !anyRLS {
		return ex, nil
	}
	c, err := RateLimitCluster(in.RateLimitAddress, in.RateLimitTLS)
	if err != nil {
		return ex, fmt.Errorf("translate: rate-limit cluster: %w", err)
	}
	if rls {
		ex.Clusters = append(ex.Clusters, c)
	}
	return ex, nil
}
