// Command xds-server is an Envoy xDS control plane for Consul: it serves the
// services and endpoints Consul (or a static file) knows over ADS to Envoy
// and proxyless gRPC nodes.
//
// Usage:
//
//	xds-server [serve] [--config FILE] [--key value ...]
//	xds-server validate --config FILE [--output text|json] [--key value ...]
//	xds-server ratelimit check --config FILE_OR_DIR [--merge-domains]
//	xds-server envoy bootstrap --node-id ID --cluster NAME [flags]
//	xds-server grpc bootstrap --node-id ID --cluster NAME [flags]
//	xds-server version
//
// Every configuration key is also a flag (--xds.address) and an env var
// (XDS_SERVER_XDS_ADDRESS); flags override env, env overrides the file.
// The keys are the table of package config.
//
// It owns signals, logger setup, the admin HTTP listener and wiring the
// packages: no domain logic. serve wires the components (wire.go, each
// step pushing a closer for what it acquires), starts them under one run
// group and stops them in reverse order of start (lifecycle.go); with
// discovery.source consul that includes the watcher of Consul's config
// entries (policy.go), whose rejections validate lists too
// (validate_policy.go). Nothing
// imports it; it must not import e2e or bench.
package main
