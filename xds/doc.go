// Package xds serves Envoy and proxyless gRPC nodes over ADS, state of the
// world and delta, with go-control-plane's server and a per-node snapshot
// cache.
//
// It owns the node registry (who is connected, since when, what they
// NACKed; client indices and endpoint slots come from a nodeindex.Table,
// see nodeindex.go and slots.go), per-node assembly (which endpoints of
// which services a node sees), and the debounced reconcile loop:
// discovery snapshots go in, per-service translations are memoized by
// content so only what changed is rebuilt, nodes that would receive identical resources share one cache
// snapshot, and resource versions are content hashes, so nothing is pushed
// when nothing changed.
//
// Listeners from configuration (Config.Listeners) are translated once and
// go to the nodes whose id or cluster matches their globs: Envoy nodes get
// the Listener, its RouteConfiguration and the RLS cluster, proxyless
// nodes an api_listener of the same name. The set of listeners is part of
// a node's assembly key, so only nodes with the same set share a
// snapshot.
//
// The cache behind go-control-plane's stream servers is our own
// (cache.go): per-node state with its own lock, pointing into the shared
// snapshots, answering Envoy nodes in ADS order and only once a named
// request names every resource, and other nodes with the named resources
// there are. State-of-the-world responses of load assignments and route
// configurations carry only what changed (cache_sotw.go; clusters and
// listeners are full state; xds.sotw_full_state sends everything), delta
// responses only what changed, both with resources encoded and hashed
// once for the whole fleet.
//
// Replicas: for the same node (id, cluster, metadata, client index) every
// replica sharing the Consul tables sends byte-identical resources under
// identical versions; nothing replica-local (input order, history, clocks)
// reaches a resource or a version. A node that reconnects with the
// versions it has (SotW version_info, delta initial_resource_versions) is
// sent nothing unless something differs (resume.go). Slots and indices
// taken from this process's table while Consul failed move back to the
// shared table when it answers again (slots_heal.go).
//
// Memory per node is kept low on the gRPC side too (server.go, codec.go):
// no read buffer, a write buffer shared between writes, and encoded
// responses in pooled buffers of at most twice their size (rather than
// grpc-go's 1 MiB ones), which the nodes of a push share.
//
// xds must not import cmd or viper.
//
// imports_test.go enforces the import rules.
package xds
