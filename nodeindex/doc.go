// Package nodeindex owns the client-index tables: dense, sticky indices
// within a group (a new member takes the lowest free index; one that
// leaves keeps its index reserved for a TTL, so a restart gets it back).
// xds uses them for the nodes' client indices (group: the node's
// subsetting group) and for the stable slots of steady-subset endpoints
// (group "endpoints:<service>").
//
// Table (table.go) is the interface; Local (local.go) is the in-process
// table (subsetting.index_source: local) and Consul (consul*.go) the same
// table kept in Consul KV and shared by every replica (index_source:
// consul), with batched check-and-set rounds and per-replica sessions,
// on consulstate (the session kept alive, the live-session list, the
// check-and-set transactions); its index session is its own, not the HA
// leader's (see consulstate's doc).
// How a node's group and index are chosen, the fallback when a table
// fails, and the endpoint slots built on a table are xds's (nodeindex.go,
// slots.go there).
//
// nodeindex imports consulstate and consul/api; it must not import xds
// or envoy.
//
// imports_test.go enforces the import rules.
package nodeindex
