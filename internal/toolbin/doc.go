// Package toolbin owns finding the external binaries that tests,
// benchmarks and the labs run, at the versions this project pins: Consul
// (ConsulVersion) and Envoy (EnvoyVersion). Each is looked for in
// $XDS_SERVER_CACHE/<name>-<version>/bin, then in
// ~/.cache/xds-server/<name>-<version>/bin (where scripts/install-consul.sh
// and scripts/install-envoy.sh put them), then on PATH; $XDS_SERVER_ENVOY_BIN
// names an Envoy of any version.
//
// toolbin must not import anything else in this module.
//
// imports_test.go enforces the import rules.
package toolbin
