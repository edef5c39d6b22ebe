// Package config owns xds-server's configuration: the table of every key
// (name, kind, default, help and the README section that explains it),
// loading it from the YAML file, XDS_SERVER_* env vars and flags
// (flag > env > file > default, the same syntax in every source: a
// duration needs a unit), validation that returns every problem at once as
// "key: value: reason" sorted by key path, the one resolver of
// per-service settings over services."*", and the conversion into each
// package's own typed config (xds, discovery, drain, weights, ratelimit,
// envoy).
//
// The key table drives --help (PrintFlags), the README's key table
// (MarkdownTable) and examples/xds-server.yaml (ExampleYAML); TestDocs
// keeps the three in step.
//
// config is pure: it reads the files the configuration names (the static
// endpoints file, rate-limit configs) and nothing else, with no network
// and no goroutines; checks that need Consul are the caller's
// (UnknownRouteServices). It must not import cmd, net/http, gRPC or
// Consul's API, and uses the other packages only for their config types
// and parsers.
package config
