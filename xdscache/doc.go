// Package xdscache is xds-server's snapshot cache, the cache.Cache that
// go-control-plane's stream servers answer from, and the encoded form of
// what it serves.
//
// Resources are encoded once (Item, NewItem; wire.go): their deterministic
// marshaling, its SHA-256 (the resource's version), and the Any and delta
// Resource every response that carries them shares. NewSnapshot assembles
// a snapshot from per-service items and extras (configured listeners,
// their routes, the RLS cluster), checks it is self-contained
// (consistent.go) and versions each type by a hash of its names and
// hashes, so equal content always gives equal versions; Variant swaps
// load assignments for per-node ones at the cost of one map.
//
// The Cache (cache.go) keeps each node's snapshot and open watches with
// their own lock: Envoy nodes are answered in ADS order and a named
// request once it names every resource of its type (cache_order.go),
// state-of-the-world responses of load assignments and routes carry only
// what changed (cache_sotw.go), delta responses only what changed
// (cache_delta.go, cache_memo.go), and a node that reconnects with the
// versions it has is sent nothing unless something differs (resume.go).
// A watch found with nothing to send is not looked at again until its
// type's version changes (watch.go), so one service's change costs a
// node's other types nothing; an answer goes on a watch's channel only if
// it has room (a stream cannot block itself in CreateWatch).
// A wildcard stream, SotW or delta, is reported to hold one entry standing
// for its type's version map (versionKey), not a copy of it: what a node
// costs does not grow with the resources it has.
//
// xdscache must not import xds or translate (nor cmd or config): it
// serves whatever resources it is given.
//
// imports_test.go enforces the import rules.
package xdscache
