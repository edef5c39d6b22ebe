// Package xds serves Envoy and proxyless gRPC nodes over ADS, state of the
// world and delta, with go-control-plane's server and a per-node snapshot
// cache.
//
// It owns the node registry (who is connected, since when, what they
// NACKed), per-node assembly (which endpoints of which services a node
// sees), and the debounced reconcile loop: discovery snapshots go in,
// per-service translations are memoized by content so only what changed is
// rebuilt, nodes that would receive identical resources share one cache
// snapshot, and resource versions are content hashes, so nothing is pushed
// when nothing changed.
//
// xds must not import cmd or viper.
package xds
