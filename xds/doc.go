// Package xds serves Envoy and proxyless gRPC nodes over ADS, state of the
// world and delta, with go-control-plane's stream servers over xdscache's
// per-node cache, and drives translation: the flow is discovery snapshot
// -> translate (pure) -> xdscache (encoded, shared snapshots) -> the
// nodes' streams.
//
// Per node and change, the streams' own work is what costs (write and
// read syscalls, go-control-plane and grpc-go per stream), so the gRPC
// server keeps HTTP/2's static 64 KiB windows (no BDP ping and window
// update answering every ACK) and SotW ADS streams run go-control-plane's
// ordered ADS loop (one channel in the cache's order, no reflect.Select),
// server_streams.go.
//
// It owns the node registry (who is connected, since when, what they
// NACKed), authorization, the bounds on what a node may ask for (names.go,
// bounds.go), and the debounced reconcile loop (reconcile.go): discovery
// snapshots go in, per-service translations are memoized by content so
// only what changed is rebuilt and encoded, nodes that would receive
// identical resources share one cache snapshot, and resource versions are
// content hashes, so nothing is pushed when nothing changed.
//
// Subsetting glue (subset.go, slots*.go, nodeindex.go, groups.go,
// variants.go, nodeweights.go): client indices and endpoint slots come
// from a nodeindex.Table; per service, a plan (translate's subset choice)
// gives each client index its endpoints, kept low-churn across snapshots;
// variants are the shared snapshots with each subset service's load
// assignment replaced by a node's pick (and its weights of its own),
// keyed so that nodes with equal picks share one. After each pass, and
// after nodes come or go, the reconciler publishes an immutable,
// versioned SubsetsView (Config.OnSubsets) that the weights pipeline
// reads: weights are fed, they never call back.
//
// Localities (localities.go, debug_localities.go): a service with a
// locality policy is translated per node place (datacenter from the
// node's metadata or Config.Datacenters, region, zone) by translate's
// LocalPlan, once per place and pass; a client index's pick of it is
// keyed by its members' content, so nodes of one place with equal picks
// share one load assignment, across passes. SetSpill hands in the zone
// spill states (from weights, through cmd); the subsets view gives such a
// service's nodes their priority 0; /debug/config and LevelsOf show a
// node's levels.
//
// Traffic policy (policy.go, policy_linger.go): SetPolicies hands in the
// services' policies; each pass expands the snapshot (translate.Expand,
// reusing the previous pass's subset picks), replaces policied services'
// route items, serves the aggregate clusters as extra clusters of every
// node and the configured listeners' routes with the policies applied. A
// target or aggregate no policy names any more lingers policyLinger, so
// that Envoy never loses a cluster before the route that named it.
//
// Stages (stages.go): each reconcile pass stamps where its change's time
// goes, cheaply (a few stamps per pass; per node only a counter and the
// first and last write): the source's read (SourceRead, handed in just
// before the snapshot), the change reaching the loop, the debounce
// firing, translation, every node's snapshot set, and the first and last
// response the pass made due handed to a stream (pushes.go attributes
// each response to the pass that made it due). They feed
// xds_change_stage_seconds{stage} (StageDiscovery ... StageLastWrite)
// and GET /debug/changes (the latest 64 passes, Passes).
//
// Files are layered one way: each uses only files below it (registry,
// bounds, buffers, memo at the bottom; the reconcile loop in the middle;
// callbacks, the server and its debug pages on top).
//
// Listeners from configuration (Config.Listeners, translated once by
// translate) go to the nodes whose id or cluster matches their globs:
// Envoy nodes get the Listener, its RouteConfiguration and the RLS
// cluster, proxyless nodes an api_listener of the same name. The set of
// listeners is part of a node's assembly key, so only nodes with the same
// set share a snapshot.
//
// Replicas: for the same node (id, cluster, metadata, client index) every
// replica sharing the Consul tables sends byte-identical resources under
// identical versions; nothing replica-local (input order, history, clocks)
// reaches a resource or a version. Slots and indices taken from this
// process's table while Consul failed move back to the shared table when
// it answers again (slots_heal.go).
//
// Memory per node is kept low on the gRPC side too (server.go, codec.go):
// no read buffer, a write buffer shared between writes, and encoded
// responses in pooled buffers of at most twice their size (rather than
// grpc-go's 1 MiB ones), which the nodes of a push share. Responses that
// carry the same resources (a group's nodes, or new streams) share one
// encoding of them, each node's nonce apart (codec_shared.go): a push or
// a connect storm holds one copy of a response, not one per node.
//
// xds must not import cmd, config, weights or viper: the weights pipeline
// is fed the node subsets (SubsetsView, through Config.OnSubsets) and
// hands weights back (SetWeights, SetNodeWeights); neither calls the other.
//
// imports_test.go enforces the import rules.
package xds
