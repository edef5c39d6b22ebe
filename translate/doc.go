// Package translate is the pure translation of xds-server: a discovered
// service and its per-service settings become Envoy resources (cluster,
// load assignment, and the api_listener and route proxyless gRPC uses),
// a configured listener becomes its Listener, api_listener and route, and
// a node's weights of its own become its load assignment of a service.
// Node composes them into everything one node receives (Node), the level
// the per-node golden tests pin.
//
// It is pure: no goroutines, no I/O, no logging, no clocks; equal inputs
// give equal resources. Encoding, hashing and serving the resources is
// xdscache's; deciding which node gets what (subsets, groups, the debounced
// reconcile loop) is xds's.
//
// translate must not import xds, xdscache, or any server or gRPC package
// (google.golang.org/grpc, go-control-plane's server and cache); it builds
// on envoy, discovery, subsetting and policy (policy must not import
// translate).
//
// Node (node.go) is one node's resources from a discovery snapshot with
// drains applied, per-service settings, global and per-node weights, the
// node's identity and the configured listeners; subset.go is the pure
// subset choice (plan, arrangement, a client index's pick) that xds's
// servicePlan caches and carries over between snapshots; locality.go and
// localize.go place a node's endpoints in priority levels by its locality
// (Failover: zone, region, datacenter), subset each level on its own
// (LocalPlan: levels and plans once per place, Pick per client index) and
// let the node's zone share priority 0 with the next level by locality
// weights (a distribute share, or a spill state from weights). Node gives what
// a server without history gives; xds/translate_equiv_test.go pins a
// fresh server's snapshots to it.
//
// PolicyService (policy.go, policyroute.go) is one service under its
// traffic policy (package policy: Consul's service-resolver, -splitter and
// -router): a cluster and load assignment per (service, subset) in use,
// named Target.Cluster ("<service>~<subset>"; the default target keeps the
// service's name), endpoints picked by the subset's filter over Instance,
// OnlyPassing sending warning instances unhealthy; and the service's
// RouteConfiguration: router routes in order, then a catch-all to the
// splitter (weighted_clusters, percent x 100) or resolver, with retries,
// timeouts and the resolver's hash policies. Other services' targets come
// back as External for the caller to serve. Its golden tests are testdata/policy/<case>.in.yaml -> <case>.out.yaml
// (policy_golden_test.go; translatetest.LoadPolicy's compact policy form).
//
// Expand (expand.go) serves a whole snapshot under the policies, for Node
// and the server alike: every target in use becomes a service of its own
// named by its cluster, so that everything per service (subsetting,
// weights by endpoint, drains, localities) applies inside each target; a
// policied service keeps its name for its default target and gets its
// routes; a split's share of a target with no serving endpoint goes to the
// other targets (unless KeepUnhealthySplits); with RetryOtherSplit, split
// routes that retry go through aggregate clusters. A policy that cannot
// be served is an Error of its service, which is then served without it.
// Listener routes take the policies through ListenerRoute
// (envoy.ApplyPolicyRoutes).
//
// Golden tests (golden_test.go, testdata/golden/<case>.in.yaml ->
// <case>.out.yaml, 61 cases; `go test ./translate -run Golden -update`
// rewrites the outputs) cover: node kinds (proxyless_basic, envoy_basic);
// edge inputs (empty_snapshot, empty_service, all_unhealthy, mixed_health,
// endpoints_unsorted, endpoint_meta, localities, ring_hash, lb_policies,
// cluster_options); weights (global_weights, node_weights,
// node_weights_unknown_endpoint, subset_node_weights); subsets
// (classic_*, steady_* incl. slots with history and a missing slot,
// replacements, subset_all_unhealthy, subset_degraded_serves, subset_size_ge_endpoints, subset_no_index,
// subset_mixed_services); each drain source as package drain hands it over
// (drain_*: consul_maintenance, static, meta, tag, admin, orca,
// deregistered, several at once; golden_drain_test.go checks them against
// drain.Overlay); listeners (rate limit with plaintext, TLS and mTLS RLS,
// a rate limit's own cluster, admission control, proxyless, no match,
// match by cluster, name clashes with a service and with the RLS cluster,
// routes to a missing service, duplicate names, an Envoy edge node with
// subsets); localities (locality_*: failover by zone and region, by
// datacenter in the configured order, remote datacenters without a
// datacenter level, distribute, spill and spill at rest, a node without a
// place or a region, a subset per level, a proxyless node's own weights
// within levels). translatetest holds the case loader, renderer and line diff.
//
// imports_test.go enforces the import rules.
package translate
