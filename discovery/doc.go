// Package discovery owns the service model (Service, Endpoint, Health,
// Snapshot), the Source interface, and the two sources that feed the control
// plane: Consul (blocking queries on the catalog and on each service's
// health) and a static YAML file (hot-reloaded).
//
// A Source emits complete, normalized snapshots: services sorted by name,
// endpoints sorted by id, bad entries skipped and reported. Consumers never
// see a partial view of the world.
//
// The sources set Endpoint.Drain for Consul maintenance (DrainConsul) and
// the static file's draining flag (DrainStatic); the other lame-duck
// sources are package drain's, applied over these snapshots.
//
// discovery must not import envoy, xds, subsetting, weights or ratelimit.
//
// imports_test.go enforces the import rules.
package discovery
