// Package envoy translates its own small input types (Service, Endpoint,
// Locality) into Envoy v3 protos: an EDS-over-ADS Cluster and a
// ClusterLoadAssignment per service, and, for proxyless gRPC clients, an
// api_listener Listener named after the service with a RouteConfiguration
// that routes everything to the service's cluster. ClusterOptions adds the
// optional cluster settings (protocol, health checks, outlier detection,
// circuit breakers, locality weights). Bootstrap and GRPCBootstrap write
// the bootstraps that point Envoy and grpc-go at xds-server.
//
// BuildHTTPListener translates an HTTPListener from configuration: an
// Envoy Listener on its address with an HttpConnectionManager (RDS over
// ADS; HTTP filters admission_control, ratelimit and the router), the
// same as a proxyless api_listener (the filters grpc-go lacks marked
// optional), and the RouteConfiguration both use (routes in order, the
// rate-limit actions on the virtual host). RateLimitCluster is the
// cluster of xds-server's own RLS. Descriptors computes, from the same
// actions, the descriptors Envoy sends to the RLS for a request.
//
// PolicyRouteConfig is a service's RouteConfiguration under its traffic
// policy: routes matching path, headers, query parameters and methods, to
// one cluster or weighted_clusters, with retries, timeouts and hash
// policies (policyroute.go; grpc-go's acceptance in
// policyroute_grpc_test.go). TargetCluster names the cluster of a
// (service, subset): "<service>~<subset>" (SubsetSep). A listener Route
// may split its requests among such clusters by weight (Route.Split,
// weighted_clusters). ApplyPolicyRoutes merges services' policy routes
// into a listener's RouteConfiguration (listenerpolicy.go): a listener
// route to a service with a policy becomes the policy's routes, narrowed
// to the listener route's path and headers.
//
// It is pure: no goroutines, no I/O, no logging. Every resource it returns
// has passed ValidateAll().
//
// envoy must not import discovery, xds, ratelimit or viper.
//
// imports_test.go enforces the import rules.
package envoy
