// Package policy owns the traffic policy that Consul users write as config
// entries: the model (model.go: Policy, Resolver, Subset, Split, Route),
// the translation of Consul's own entry types (github.com/hashicorp/consul/api)
// into it with every unsupported field reported (entry.go, resolver.go,
// router.go), subset filters compiled and evaluated with Consul's filter
// library, go-bexpr (filter.go: Filter, Instance), and the set of last good
// entries (set.go: Set), which keeps an entry's last good version when a new
// one is rejected and returns a service to its defaults when its entries are
// deleted. These are the pure core: no goroutines, no I/O, no logging.
//
// The shell is watch.go: Watcher reads the four kinds (service-defaults,
// service-resolver, service-splitter, service-router) with blocking queries
// through consulstate.Watch, applies each list to the Set, logs and counts
// rejections (metrics.go: Metrics, xds_policy_*); ReadOnce is one
// non-blocking read of the four kinds, for a validate-like caller.
//
// The file's services.<name> settings reach the same model through
// FromFile (file.go: FileService, plain types that config fills), and
// Merge is the precedence rule between the two: a service-resolver entry
// wins whole over the file's resolver settings.
//
// Translation into clusters per (service, subset), weighted clusters and
// routes is not here: translate/ and envoy/ will consume Policy.
//
// policy must not import envoy, xds, xdscache, translate, discovery,
// subsetting, weights, ratelimit, config or cmd; of this module it imports
// consulstate (blocking-query loop) and the internal/ leaves.
//
// imports_test.go enforces the import rules.
package policy
