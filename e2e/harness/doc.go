// Package harness starts the real parts that integration and end-to-end
// tests run against, each on free loopback ports and stopped when the test
// ends: among them a Consul agent (`consul agent -dev`, see Consul) with its
// own temporary config dir, Redis (one node, a Redis Cluster: RedisCluster,
// or a Sentinel set: RedisSentinel), the xds-server binary (one process, or
// several replicas of one control plane: StartReplicas; Kill ends one as
// a crash would), example backends, a raw ADS client (ads.go, able to
// resume with the versions a node has), and a TCP proxy that can cut one
// client off a server (Proxy: a partition).
//
// A test whose external binary is missing is skipped, unless the
// environment variable XDS_SERVER_REQUIRE_INTEGRATION=1 is set (as in CI),
// which fails it instead. scripts/install-consul.sh installs consul.
//
// harness is imported by tests only. It must not import the packages under
// test (discovery, xds, envoy, ...): their own tests import harness. Of this
// module it imports only internal/ leaves (internal/freeport and
// internal/toolbin, shared with bench/).
package harness
