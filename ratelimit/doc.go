// Package ratelimit owns the global rate-limit service: Envoy's RLS v3
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit), its
// configuration (envoyproxy/ratelimit's YAML, unchanged, plus our
// extensions), the descriptor matcher, the algorithms, and the stores.
//
// ratelimit must not import xds, discovery, envoy (this module's) or cmd;
// of this module it imports only internal/metricreg; it uses
// go-control-plane's RLS protos, gRPC, Prometheus and go-redis.
// The core is pure (no goroutines, I/O, logging or clock: every function
// that needs the time takes it): unit.go, criticality.go, config.go,
// config_yaml.go, config_rule.go, match.go and algorithm.go. The shell is
// the memory store (memory.go), the Redis store (redis.go,
// redis_script.go and its Lua script redis.lua, over go-redis;
// redis_mode.go and redis_cluster.go for Redis Cluster and Sentinel), the
// local over-limit cache (overlimit.go), the service (service*.go,
// metrics.go), file loading and reloads (files.go) and the HTTP
// debugging handler (http.go).
//
// # Configuration
//
// Load reads envoyproxy/ratelimit files: one domain per file (a second file
// for a domain is an error naming both, unless LoadOptions.MergeDomains,
// envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG, merges their descriptors),
// descriptors nested under descriptors, each with a key, an optional value
// (a '*' anywhere in it makes a wildcard, matching any run of characters),
// an optional rate_limit {unit, requests_per_unit, unlimited, name,
// replaces: [{name}]}, and shadow_mode, quota_mode (over the limit answers
// OK, counted in over_limit), detailed_metric, value_to_metric and
// share_threshold. Units are second, minute, hour, day, week, month (30
// days) and year (365 days), in any case. Validation is strict: unknown or
// misplaced keys, duplicate keys or descriptors (also across merged
// files), bad units, unlimited with a unit or requests_per_unit, a
// rate_limit replacing itself, share_threshold without a wildcard are all
// errors, reported together, each as "file:line:column: yaml.path:
// reason" (a duplicate domain as `domain "d" in FILE is already defined
// in FILE (...)`). A missing requests_per_unit is 0 (refuse all), as
// there.
//
// Our extensions are extra keys of rate_limit: algorithm (fixed_window,
// the default, sliding_window, sliding_log, token_bucket, leaky_bucket),
// burst (bucket capacity, in requests) and criticality (below).
//
// # Matching
//
// As envoyproxy/ratelimit (Config.Match): the entries of a request
// descriptor walk the tree, each looked up among the children of the
// previous match: exact key and value first, then the wildcards of that
// key in configuration order (the first that matches wins), then the key
// without a value. A rule applies only when the last entry lands on a
// descriptor with a rate_limit: a request deeper or shallower than the
// configuration matches nothing. Unknown domains and unmatched
// descriptors are OK without a limit. A per-descriptor limit override
// (requests_per_unit and unit from the request) applies to any
// descriptor of a configured domain, keeps the matched rule's algorithm
// and criticality settings, and is never unlimited, shadowed or replaced.
// Each descriptor is one bucket, keyed as envoyproxy/ratelimit's cache
// key "domain_key1_value1_key2_value2_" (the window start follows for a
// fixed window, see FixedWindowKey); with share_threshold every value a
// wildcard matches shares one bucket (the pattern replaces the value in
// the key). When several matched rules name each other, a rule named in
// another's replaces is dropped (answered OK, not counted). unlimited
// rules answer OK with limit_remaining 2^32-1 without asking the store;
// shadow_mode rules are counted and reported but never refuse.
//
// # Algorithms
//
// Decide is the reference of every store. Usage is counted in requests;
// a check of class cap K admits its hits while usage + hits <= K.
//
//   - fixed_window: envoyproxy/ratelimit's: the window is floor(now/unit)
//     in whole Unix seconds, duration_until_reset is the rest of the
//     window in whole seconds, and hits refused by the full limit are
//     still counted (so a window over its limit stays over it).
//   - sliding_window: the counter approximation: the previous window's
//     count weighted by its overlap with the unit ending now, plus the
//     current count; refused hits are not counted. At most the limit per
//     aligned window, at most twice the limit in any unit-long window.
//   - sliding_log: the time of every admitted hit of the last unit (at
//     most the limit, 100,000 at most, per key): exact, never more than
//     the limit in any unit-long window.
//   - token_bucket and leaky_bucket: GCRA (the virtual scheduling form of
//     both meters): a request costs T = unit/requests_per_unit, usage is
//     the theoretical arrival time ahead of now over T, capacity is burst.
//     At most burst + elapsed/T in any interval. The token bucket's burst
//     defaults to requests_per_unit (a full unit at once), the leaky
//     bucket's to 1 (strict pacing, one request every T).
//
// limit_remaining is what the request's class may still add now.
// duration_until_reset is, when refused, the time until the same request
// would pass, and when admitted, the time until the whole limit is
// available again (for fixed windows, the window's end).
//
// # Criticality
//
// A descriptor entry with key CriticalityConfig.Key ("criticality") and
// value CRITICAL_PLUS, CRITICAL, SHEDDABLE_PLUS or SHEDDABLE sets the
// request's class (absent or unknown: CRITICAL); the entry is removed
// before matching and keying, so every class shares one bucket. A rule
// with criticality settings admits class c only while usage stays within
// its cap: a share of the capacity (DefaultShares: 0.7, 0.8, 0.9, 1.0)
// or an absolute per-class limit. Caps never decrease with criticality,
// so a class is refused only once every lower class already is, and the
// gaps are headroom for the classes above. Refusals by a class cap are
// not counted, so shed traffic does not eat the reserve. By default the
// caps adapt to demand (demand.go): per limit key, each class's hits over
// the last unit, refused ones included, and a class is admitted only while
// the bucket keeps room for what the classes above it will ask for (until
// the fixed window ends; a quarter unit at least for the sliding windows;
// the refill time of a bucket's burst). Requests without a criticality
// entry are all CRITICAL and reserve nothing, so envoyproxy/ratelimit
// configurations give the same answers. Static caps are opt-in
// (rate_limit.criticality: true for CriticalityConfig.Shares, or a
// mapping of its own; CriticalityConfig.Enabled for every rule); a class
// gets the smaller of the two.
//
// # Stores and failures
//
// A Store decides all the checks of a request in one call (one round trip
// for a remote store); Memory is the in-process one, bounded in keys and
// bytes (MemoryConfig): a full shard makes room by dropping expired keys,
// else its coldest key: forgotten when under half its limit, else folded
// into a conservative-update sketch (memSketch) that new keys of its kind
// start from (approximately: never beyond a key's limit, possibly refused
// early); so a key flood cannot refuse brand-new keys nor reset a hot
// one. A background Sweep drops expired keys. Redis is shared by
// replicas: one Redis node, a Redis Cluster or the master behind Sentinel
// (RedisMode; password or ACL user, TLS), one atomic Lua
// script per call (per hash slot in a cluster) deciding every check in order at the caller's clock
// (never Redis's TIME), with the same answers as Memory. Unix times in ns
// do not fit Lua's doubles, so the script keeps them as (seconds,
// nanoseconds) pairs or 19-digit strings and replies each key's state
// before the check; the Go side computes the result from it with
// Decide's arithmetic. Every key has a TTL: the time until it holds no
// usage, plus a second of grace. In front of any store
// the service keeps a local cache of keys known to be over their limit
// until their reset (Result.Exhausted) and refuses them without asking.
// A Redis Decide call waits at most RedisConfig.Timeout from its start,
// and a circuit breaker (RedisConfig.BreakerFailures, BreakerBackoff;
// one per master in a cluster) fails calls at once after consecutive
// failed runs, letting one call probe Redis after a backoff. In a
// cluster, a failed slot run fails only the calls with a check there.
// Split (envoyproxy/ratelimit's REDIS_PERSECOND) sends the checks per
// second to a second store and the rest to the main one, both at once;
// one that fails fails only its checks (PartialError). When the store fails,
// ServiceConfig.FailureMode answers: allow (the default) or deny; each
// failure is counted and logged at most once per ErrorLogInterval.
// Requests that do not decode (invalid UTF-8, malformed protobuf) are
// InvalidArgument when the gRPC server has ServerOptions, and behind
// Call; an empty config path is ErrEmptyConfig unless
// LoadOptions.AllowEmpty.
//
// # Serving
//
// Register puts the service on a grpc-go server (ServerOptions); Call
// answers one encoded request for a lean server (package h2rpc, at
// RLSPath: ratelimit.server lean). Requests are decoded without
// reflection where they have the usual form (wire_request.go; anything
// else goes to proto.Unmarshal) and responses encoded without it
// (wire.go), byte for byte what proto.Marshal writes.
//
// # Metrics
//
// Per rule, labelled domain and rule (the rule key without its domain):
// ratelimit_total_hits_total, _over_limit_total,
// _over_limit_with_local_cache_total, _near_limit_total (hits admitted
// above 80% of the limit), _within_limit_total, _shadow_mode_total, in
// hits. Rule keys are the configured rules', plus per-value keys where
// detailed_metric or value_to_metric ask for them and for overrides, as
// envoyproxy/ratelimit names its stats, bounded by MaxMetricKeys. Also
// ratelimit_requests_total{result}, ratelimit_store_errors_total,
// ratelimit_failure_mode_total{mode}, ratelimit_store_latency_seconds,
// ratelimit_decision_latency_seconds and
// ratelimit_config_reloads_total{result}. A store that is a
// prometheus.Collector is registered with the service: Memory's
// ratelimit_memory_keys, _bytes, _evictions_total{reason} and
// _overflow_total, Redis's ratelimit_redis_breaker_state, _trips_total,
// _rejected_total, _slot_runs_failed_total, _slot_calls_failed_total and
// _node_runs_redone_total
// (under Split, labelled store="main" or "per_second").
//
// imports_test.go enforces the import rules.
package ratelimit
