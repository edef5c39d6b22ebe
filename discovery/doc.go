// Package discovery owns the service model (Service, Endpoint, Health,
// Locality, Snapshot: model.go), the Source interface, and the two sources
// that feed the control plane: Consul (blocking queries on the catalog and
// on each service's health, consul*.go; with several datacenters, the
// same loops per datacenter, joined per service in consul_dc.go, each
// datacenter kept at its last known endpoints while it cannot be read)
// and a static YAML file (hot-reloaded, static.go).
//
// ConsulConfig.OnRead reports, just before each emitted snapshot, when the
// blocking query that saw its first change returned and the index before
// and after (Read): the start of a change's path for xds's stage metrics.
//
// A Source emits complete, normalized snapshots (normalize.go): services
// sorted by name, endpoints sorted by id, bad entries skipped and reported
// as Problems. Consumers never see a partial view of the world.
//
// Between a Source and its consumer sit two more pieces of this package:
//   - the mass-removal guard: RemovalGuard (guard.go, guard_keep.go) is the
//     pure core deciding what of a snapshot is applied and what is held
//     (one service losing most of its instances, or most of all instances
//     at once); Guard (guard_run.go) is its shell, with the timer, the log
//     lines and the xds_discovery_held* metrics;
//   - the change log: ChangeLog (changelog.go) writes one line per changed
//     service per update, from Changes and HealthCounts (changes.go).
//
// The sources set Endpoint.Drain for Consul maintenance (DrainConsul) and
// the static file's draining flag (DrainStatic); the other lame-duck
// sources are package drain's, applied over these snapshots.
//
// Other packages use its Consul helpers: ConsulConfig.ConsulClient and
// ConsulTLS (discovery.consul's settings made into consulstate's client,
// for cmd, config and ha), CheckConsulAddress (config's validation) and
// ReplicaCheckPrefix (the id prefix of the HA alive checks, which health
// mapping ignores). Metrics (metrics.go) are its collectors.
//
// discovery must not import envoy, xds, subsetting, weights, ratelimit or
// cmd; of this module it imports consulstate (the client, blocking-query
// index rules and retry delays) and the internal/ leaves.
//
// imports_test.go enforces the import rules.
package discovery
