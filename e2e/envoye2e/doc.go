// Package envoye2e proves, with real Envoy processes, what xds-server
// tells Envoy to do: Envoy 1.40 (scripts/install-envoy.sh) bootstraps from
// `xds-server envoy bootstrap`, connects to the real xds-server binary
// over ADS (state of the world and delta), and each test asserts Envoy's
// own view (admin /stats, /clusters, /config_dump) and real traffic
// through its listeners to real backends registered in a real Consul.
// When a test fails it says what Envoy said: the rejected stat and its
// log lines.
//
// The tests are skipped with -short, and without an envoy binary unless
// XDS_SERVER_REQUIRE_INTEGRATION=1 (make test, CI), which fails them.
//
// envoye2e runs the built binaries: it must not import cmd.
package envoye2e
