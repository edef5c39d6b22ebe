// Package config owns xds-server's configuration: the table of every key
// (name, kind, default, help and the README section that explains it),
// loading it from the YAML file, XDS_SERVER_* env vars and flags
// (flag > env > file > default, the same syntax in every source: a
// duration needs a unit), validation that returns every problem at once as
// "key: value: reason" sorted by key path, the one resolver of
// per-service settings over services."*", and the conversion into each
// package's own typed config. It converts into, or checks values with the
// parsers of, twelve packages: xds (server, subsetting and listener
// settings), discovery (sources, guard, Consul client), drain, weights,
// ratelimit, envoy (cluster, listener and route options), subsetting (the
// algorithm names), ha, console, certs (TLS files and globs), examples
// (the embedded endpoints of the demo listeners) and policy (the file's
// subsets, default_subset, redirect and hash_policies as a policy.Policy:
// FilePolicy, servicepolicy.go).
//
// The key table drives --help (PrintFlags), the README's key table
// (MarkdownTable) and examples/xds-server.yaml (ExampleYAML); TestDocs
// keeps the three in step.
//
// config is pure: it reads the files the configuration names (the static
// endpoints file, rate-limit configs) and nothing else, with no network
// and no goroutines; checks that need Consul are the caller's
// (UnknownRouteServices). It must not import cmd, e2e, bench, net/http,
// gRPC or Consul's API, and uses the other packages only for their config
// types and parsers.
//
// imports_test.go enforces the import rules.
package config
