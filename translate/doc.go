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
// on envoy, discovery and subsetting.
//
// imports_test.go enforces the import rules.
package translate
