package policy

import (
	"time"

	"github.com/hashicorp/consul/api"
)

// The config entry kinds read from Consul, in the order Watcher lists them.
const (
	KindDefaults = api.ServiceDefaults // "service-defaults"
	KindResolver = api.ServiceResolver // "service-resolver"
	KindSplitter = api.ServiceSplitter // "service-splitter"
	KindRouter   = api.ServiceRouter   // "service-router"
)

// Kinds lists the kinds this package reads.
var Kinds = []string{KindDefaults, KindResolver, KindSplitter, KindRouter}

// Bounds. Entries are written by operators, not by outsiders, but a
// mistaken script can still write thousands: what is beyond a bound is
// rejected (reason ReasonTooMany or ReasonTooLarge), never truncated.
const (
	MaxEntriesPerKind = 2000 // entries of one kind kept (by name order); the rest rejected
	MaxSubsets        = 64   // subsets of one resolver
	MaxFailovers      = 64   // failover keys of one resolver
	MaxDatacenters    = 16   // datacenters of one failover
	MaxSplits         = 64   // splits of one splitter
	MaxRoutes         = 256  // routes of one router
	MaxMatchItems     = 32   // headers, query parameters or methods of one route match
	MaxHashPolicies   = 16   // hash policies of one load balancer
	MaxRetryItems     = 32   // RetryOn or RetryOnStatusCodes items of one route
	MaxFilterBytes    = 1024 // length of one subset filter
	MaxFilterTerms    = 64   // match and collection expressions in one subset filter
)

// Policy is one service's effective traffic policy: what its four entries
// say, each the last good version. A zero part means Consul's default.
type Policy struct {
	Service  string
	Protocol string    // service-defaults Protocol: "tcp", "http", "http2", "grpc"; "": not set
	Resolver *Resolver // nil: no service-resolver (one cluster, no subsets)
	Splits   []Split   // nil: no service-splitter
	Routes   []Route   // nil: no service-router
	Entries  []EntryRef
}

// IsDefault reports whether p says nothing beyond Consul's defaults.
func (p Policy) IsDefault() bool {
	return p.Protocol == "" && p.Resolver == nil && p.Splits == nil && p.Routes == nil
}

// EntryRef names the entry a part of a Policy came from.
type EntryRef struct {
	Kind, Name  string
	ModifyIndex uint64 // Consul's index of the version in use
}

// Resolver is a service-resolver: subsets, the default subset, a redirect,
// failover targets, timeouts and the load balancer.
type Resolver struct {
	DefaultSubset  string
	Subsets        []Subset // sorted by name
	Redirect       *Redirect
	Failover       []Failover    // sorted by key; key "*" is any subset
	ConnectTimeout time.Duration // 0: ours (translation's default)
	RequestTimeout time.Duration // 0: none
	LoadBalancer   *LoadBalancer
}

// Subset returns the subset named name.
func (r *Resolver) Subset(name string) (Subset, bool) {
	for _, s := range r.Subsets {
		if s.Name == name {
			return s, true
		}
	}
	return Subset{}, false
}

// Subset is one named subset of a service's instances.
type Subset struct {
	Name        string
	Filter      *Filter // nil: every instance
	OnlyPassing bool    // instances with a warning check are left out
}

// Redirect sends every request for the service elsewhere.
type Redirect struct {
	Service, ServiceSubset, Datacenter string // "": the same as the resolver's
}

// Failover lists where a subset's traffic goes when it has no healthy
// instance.
type Failover struct {
	Subset        string // "*": any subset
	Service       string // "": the same service
	ServiceSubset string
	Datacenters   []string
}

// LoadBalancer is the resolver's load balancing policy.
type LoadBalancer struct {
	Policy          string // "", "round_robin", "least_request", "ring_hash", "maglev", "random"
	MinimumRingSize uint64 // ring_hash only; 0: translation's default
	MaximumRingSize uint64
	ChoiceCount     uint32 // least_request only; 0: default
	HashPolicies    []api.HashPolicy
}

// Split is one share of a service-splitter.
type Split struct {
	Weight        float32 // percent, in [0, 100], the splits summing to 100 (0 keeps the target served, with no traffic)
	Service       string  // "": the splitter's service
	ServiceSubset string
}

// Route is one route of a service-router: requests that match go to the
// destination. Routes are tried in order; an unmatched request goes to the
// service itself (its splitter or resolver).
type Route struct {
	PathExact, PathPrefix, PathRegex string // at most one
	CaseInsensitive                  bool
	Headers                          []api.ServiceRouteHTTPMatchHeader
	QueryParams                      []api.ServiceRouteHTTPMatchQueryParam
	Methods                          []string
	Destination                      Destination
}

// Destination is where a route sends its requests and how.
type Destination struct {
	Service, ServiceSubset string // "": the router's service
	PrefixRewrite          string
	RequestTimeout         time.Duration // 0: none
	IdleTimeout            time.Duration // 0: none
	NumRetries             uint32
	RetryOnConnectFailure  bool
	RetryOnStatusCodes     []uint32
	RetryOn                []string
}
