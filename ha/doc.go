// Package ha owns the replica-shared state that lets several xds-server
// replicas behind one address serve one truth (ha.enabled), kept in
// Consul KV through consulstate (the watches, the leader's lock and
// session, the transactions): the replica id and the KV layout under
// ha.consul.prefix (config.go: Config, Layout), the admin drains and the
// departures kept in KV (drains*.go: DrainStore, the drain.Store of every
// replica), the weights exchange (weights*.go: Weights, the pipeline's
// weights.SummaryExchange and weights.TableExchange: each replica's load
// summary, the weights leader and its table), the replica's alive check
// (alive.go: Alive), the HA metrics (metrics.go) and the /debug/ha page
// (debug.go).
//
// KV layout, under the prefix P (default "xds-server/"):
//
//	P drains/service/<service>               an admin drain of a whole service
//	P drains/endpoint/<service>/<endpoint>   an admin drain of one endpoint
//	P drains/node/<node>                     an admin drain of a Consul node
//	P drains/_epoch                          created once; missing means a fresh Consul or lost state
//	P drains/departed/<service>/<endpoint>   a departed endpoint, DRAINING until its removal time
//	P weights/summaries/<replica>            a replica's load summary
//	P weights/table                          the weights leader's table
//	P weights/leader                         the weights leader's lock
//
// Path segments of the drains folder are escaped with url.PathEscape, so
// a "/" in a name never splits a key; a replica id (which has no "/") is
// used as it is. A drain's value is its JSON (drain.Admin: the target,
// since, and until as an absolute expiry, or none); expired drains are
// ignored by every replica and deleted (check-and-set) by whichever
// replica sees them first. When the epoch key is missing (Consul lost its
// state: a -dev agent restarted, a cluster rebuilt), the first replica to
// notice writes it back with the drains it knew, in one transaction that
// checks the key is still missing, so the drains stay in force; drain
// writes are refused until a replica has read the folder with its epoch
// again after a failure, so an undrain is never undone by a restore.
//
// Departures (drains_departed.go) share the deregistration window
// (drain.window): the first replica to see an endpoint leave discovery
// creates its key (check-and-set index 0, so the first removal time wins)
// with the endpoint as last registered and its absolute removal time; the
// drains watch reads the folder with the drains (at most MaxDeparted) and
// every replica serves those endpoints DRAINING until that time, a
// replica that started later included. A re-registration deletes the key
// (check-and-set on the index read); expired ones are deleted by whichever
// replica reads them first. The writes are queued (at most 1024; beyond,
// dropped and counted) and never block discovery; when Consul is
// unreachable each replica keeps its own windows. Departures are not
// written back when Consul lost its state (the replicas' own windows
// stay).
//
// What the drains folder holds is bounded (kvcheck.go): value sizes, names
// of at most MaxKVNameBytes, a valid endpoint, an expiry within
// drain.MaxTTL; other entries are skipped, counted once per version in
// xds_ha_errors_total and logged at most badLogLines per badLogEvery,
// names clipped. Whether a departure is served is drain's to judge.
//
// Weights (weights.go, weights_kv.go, weights_leader.go) writes this
// replica's summary at most every ha.publish_interval when its content
// changed (gzip'd JSON), watches the weights folder for every replica's
// summary and the table, and campaigns for the leader key
// (consulstate.Lead: a session of TTL 10s and lock-delay
// ha.leader_lock_delay, invalidated by serfHealth and the alive check);
// the leader writes the table in the same transaction as its summary,
// fenced by its session, and deletes summaries older than 10m. It owns
// xds_ha_leader and xds_ha_summary_age_seconds. When Consul lost its
// state (its index starts over), every watch reads it again as soon as it
// answers (a failed query resets the index, as consulstate.Watch does),
// each replica writes its summary again although unchanged, a replica
// whose leader session is gone takes a new one at once, and the leader
// writes its table again (the pipeline keeps handing it over until the
// store holds it); meanwhile every replica keeps serving the last table.
//
// Alive is each replica's node-level TTL check on its local Consul agent
// (id "xds-server-ha:<replica>", TTL ha.alive_ttl, 3s by default, kept
// passing every TTL/3, each update given TTL/3, deregistered on a clean
// stop after the leader session is gone). The leader session names it
// besides serfHealth, so a leader killed with -9
// loses the lead within the TTL plus ha.leader_lock_delay, not the
// session TTL (10s, up to 2x). The updates are agent-local (the output
// never changes: no catalog write). A check left critical by a replica
// killed without a goodbye is removed by the next replica that starts on
// that agent; meanwhile Consul reports every service of that node
// critical, so xds-server's Consul discovery ignores node checks of this
// prefix (discovery.ReplicaCheckPrefix). Other Consul readers (DNS, other
// tools) still see them.
//
// ha imports consulstate (the Consul-state layer), drain (the drain
// types it stores), weights (the summary and table types it exchanges),
// discovery (only ReplicaCheckPrefix), the internal/ leaves (httpjson,
// logclip, metricreg, pause) and consul/api; it must not import
// xds, envoy or cmd.
//
// imports_test.go enforces the import rules.
package ha
