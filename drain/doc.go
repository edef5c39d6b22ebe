// Package drain owns the lame-duck sources applied over discovery
// snapshots: Consul maintenance and the static file's draining flag (set
// by the discovery sources themselves), the deregistration window (a
// departed endpoint stays DRAINING for a while), a meta key and a tag, an
// ORCA named metric, and the admin drain API (POST, DELETE and GET
// /v1/drain).
//
// The Overlay (drain.go) is the pure core: it turns a discovery snapshot
// and the drains in force into the snapshot served, with the reasons in
// Endpoint.Drain, and says when it must run again; it reads no clock and
// starts nothing. The Manager (manager.go) is the shell around it: it
// takes discovery snapshots, admin drains and ORCA lame-duck states (as a
// subscriber of the weights pipeline's lame-duck transitions, applied at
// once), emits the result, arms the timers and exports
// xds_draining_endpoints.
// http.go serves the admin API. store.go is the Store interface: with HA
// (ha.DrainStore), admin drains are written to Consul KV first (503 when
// that fails: nothing changes) and every replica applies the store's
// content; without a Store they live in the Manager. departed.go shares
// the deregistration window the same way when the Store also implements
// Departures: the departures this replica sees first are recorded, and
// those recorded by any replica are served DRAINING until their removal
// time, the first replica's, within bounds (anyone who can write the KV
// can write a departure): only for an endpoint this replica's discovery
// saw, or of a service it serves that left before this replica started,
// and never beyond the drain window from now; the rest are refused and
// counted (Overlay.Refusals).
//
// drain may import discovery (the model) and the internal/ leaves
// (httpjson for the admin API's answers, metricreg, logclip); it must not
// import xds, envoy or cmd.
//
// imports_test.go enforces the import rules.
package drain
