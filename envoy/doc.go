// Package envoy translates its own small input types (Service, Endpoint,
// Locality) into Envoy v3 protos: an EDS-over-ADS Cluster and a
// ClusterLoadAssignment per service, and, for proxyless gRPC clients, an
// api_listener Listener named after the service with a RouteConfiguration
// that routes everything to the service's cluster.
//
// It is pure: no goroutines, no I/O, no logging. Every resource it returns
// has passed ValidateAll().
//
// envoy must not import discovery, xds, ratelimit or viper.
package envoy
