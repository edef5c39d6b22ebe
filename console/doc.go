// Package console owns the web console served at /ui/ on the admin
// address: the embedded pages and assets (assets/, no CDN, no external
// fonts, charts drawn as plain SVG by assets/app.js), the JSON API under
// /ui/api/ (fleet, services/{name}, history/{name}, drains, ratelimit),
// the bounded history ring of weights, utilization and spread
// (history.go) and the rate-limit statistics with their bounded top-k of
// keys nearest their limit (ratelimit.go).
//
// It reads what the rest of the process knows through small interfaces it
// defines (sources.go): the served discovery snapshot (Observe), the xDS
// server's nodes and subsets, the weight table, the drain state, the
// rate-limit rules, the traffic policy from Consul's config entries (a
// service's policy in brief and the rejected entries, each a problem of
// the fleet page; policy.go) and the metrics registry (the discovery sources' and
// each Consul datacenter's state: ok, or stale since when; datacenters.go). Without JavaScript every
// page is a server-rendered table (html/template); the script polls one
// JSON endpoint per page, at most once a second, and calls the existing
// drain API (/v1/drain) for the drain and undrain buttons. With an admin
// token the pages are served without data, and the script sends the
// token (entered once, kept in the tab's sessionStorage) on every call.
//
// Bounds: the history holds at most MaxSeries series of HistoryPoints
// samples (console_history_series_dropped_total counts the rest); the
// rate-limit statistics hold MaxDomains domains
// (console_ratelimit_domains_dropped_total) of TopK keys each, a key
// kept as at most MaxKeyBytes; the fleet page gathers the metrics and
// lists the nodes at most once a second (every.go); a service page
// asks the xDS server for a summary of the service's subsets (connections
// per endpoint, MaxNodeChoices node ids; never the per-node lists of all
// nodes) at most once a second per service (subsets.go), and for the
// chosen node's subset alone. A request naming a service of more than
// MaxServiceNameBytes or a node of more than xds.MaxNodeIDBytes is
// refused (400) before any lookup.
//
// console may import discovery, xds, weights, drain, ratelimit and policy
// (their types) and the internal/ leaves (httpjson, metricreg); it must not import
// cmd, config or envoy.
//
// imports_test.go enforces the import rules.
package console
