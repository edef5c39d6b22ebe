package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"gopkg.in/yaml.v3"
)

// envPrefix prefixes every environment variable: xds.address is
// XDS_SERVER_XDS_ADDRESS.
const envPrefix = "XDS_SERVER"

// option is one configuration key: its default and its help text. Every
// option is a file key, a flag (--key) and an env var.
type option struct {
	key  string
	def  any
	help string
}

// options lists every scalar key; services.<name>.* are file-only.
var options = []option{
	{"xds.address", ":18000", "host:port of the xDS (ADS) gRPC listener"},
	{"xds.debounce", 50 * time.Millisecond, "quiet time that ends a burst of discovery changes before nodes are updated"},
	{"xds.max_delay", time.Second, "longest a burst of changes may postpone an update"},
	{"xds.node_grace", 5 * time.Minute, "keep the snapshot of a disconnected node this long"},
	{"xds.max_streams", uint32(1000), "concurrent gRPC streams per client connection"},
	{"xds.shutdown_grace", 5 * time.Second, "on SIGTERM, new streams are refused at once and existing ones keep being served (and updated) this long, so clients can reconnect elsewhere"},
	{"xds.shutdown_timeout", 10 * time.Second, "after the grace, how long closing the streams may take before they are cut"},
	{"xds.keepalive.time", 30 * time.Second, "ping a client connection idle this long"},
	{"xds.keepalive.timeout", 10 * time.Second, "close a connection whose ping is not answered in this time"},
	{"xds.keepalive.min_time", 10 * time.Second, "reject clients that ping more often than this"},
	{"admin.address", "127.0.0.1:19000", "host:port of the admin HTTP listener (/healthz, /readyz, /metrics, /debug/*)"},
	{"discovery.source", "static", "discovery source: static or consul"},
	{"discovery.static.file", "examples/endpoints.yaml", "YAML file of services and endpoints, reloaded on change (the built-in example if this default path does not exist)"},
	{"discovery.static.poll_interval", time.Second, "how often the static file is checked for changes"},
	{"discovery.consul.address", "127.0.0.1:8500", "host:port of the Consul HTTP API"},
	{"discovery.consul.token", "", "Consul ACL token (default: the CONSUL_HTTP_TOKEN env var)"},
	{"discovery.consul.datacenter", "", "Consul datacenter (default: the agent's)"},
	{"discovery.consul.services", []string{}, "only these Consul services (default: all)"},
	{"discovery.consul.tags", []string{}, "only service instances with all these tags"},
	{"discovery.consul.wait", 5 * time.Minute, "blocking query wait time"},
	{"discovery.consul.min_interval", 100 * time.Millisecond, "minimum time between two discovery updates"},
	{"discovery.consul.backoff_base", 250 * time.Millisecond, "first retry delay after a Consul error (doubles up to backoff_max, with jitter)"},
	{"discovery.consul.backoff_max", 30 * time.Second, "longest retry delay after Consul errors"},
	{"discovery.consul.warning_as", "healthy", "endpoints with a warning check: healthy (with the service's Weights.Warning) or degraded"},
	{"subsetting.index_source", "local", "where nodes get their client index (and endpoints their slot): local (lowest free index per group, sticky), consul (the same tables in Consul KV, shared by replicas) or metadata (the node's subset.index metadata; endpoint slots stay local)"},
	{"subsetting.index_ttl", 10 * time.Minute, "a disconnected node's client index (and a departed endpoint's slot, for steady subsetting) stays reserved for it this long"},
	{"subsetting.group_by", "cluster", "nodes are indexed per group: cluster (the node's cluster), zone, none, or metadata.<key>"},
	{"subsetting.consul.prefix", "xds-server/subsetting", "Consul KV prefix of the client index and endpoint slot tables (index_source consul; Consul address and token from discovery.consul.*)"},
	{"weights.update_period", time.Second, "recompute EDS weights from utilization reports this often"},
	{"weights.min_change", 0.05, "push new weights only when some endpoint's share of its service changed by more than this fraction"},
	{"weights.min_push_interval", 5 * time.Second, "at most one weight-driven push per this interval"},
	{"weights.blackout_period", 10 * time.Second, "a new endpoint's reports count only after it has reported for this long"},
	{"weights.expiration_period", 3 * time.Minute, "reports older than this are ignored (the endpoint gets the service's mean weight)"},
	{"weights.smoothing", 0.5, "EWMA factor applied to new weights, in (0, 1]; 1 means no smoothing"},
	{"weights.error_utilization_penalty", 1.0, "cost of errors: weight = qps / (utilization + eps/qps * penalty)"},
	{"weights.overload_threshold", 0.9, "an endpoint above this utilization sheds weight"},
	{"weights.overload_recover", 0.8, "an overloaded endpoint regains weight only below this utilization"},
	{"weights.max_ratio", 100.0, "largest over smallest EDS weight within a service"},
	{"weights.orca_interval", time.Second, "ORCA report interval asked of backends"},
	{"weights.lrs_interval", time.Second, "load report interval asked of LRS clients (Envoy, gRPC)"},
	{"weights.balance", true, "global mode: when nodes send LRS, pick the one weight per endpoint that evens out the utilization their subsets and rates predict (else the formula's weights alone)"},
	{"weights.per_node_damping", 0.5, "per_node mode: fraction of the way from a node's last weights to the solver's optimum per push, in (0, 1]"},
	{"drain.window", 30 * time.Second, "an endpoint that leaves discovery stays DRAINING this long before it is removed (0: removed at once); per service: services.<name>.drain_window"},
	{"drain.meta_key", "lame_duck", "endpoints whose meta value at this key is true (true, 1, yes, on) are DRAINING; empty: off"},
	{"drain.tag", "lame_duck", "endpoints with this tag are DRAINING; empty: off"},
	{"drain.orca_metric", "lame_duck", "endpoints whose ORCA reports carry this named metric >= 1 are DRAINING (services with the orca weights source); empty: off"},
	{"ratelimit.address", ":18081", "host:port of the rate-limit service (Envoy RLS v3 gRPC)"},
	{"ratelimit.config", "", "envoyproxy/ratelimit YAML file or directory (one domain per file); empty: no domains, every request is OK"},
	{"ratelimit.merge_domains", false, "merge rate-limit files that share a domain (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG); off: a second file for a domain is an error naming both files"},
	{"ratelimit.failure_mode", "allow", "when the store fails: allow (fail open) or deny"},
	{"ratelimit.store", "memory", "where counters live: memory (this process) or redis (shared by replicas; ratelimit.redis.*)"},
	{"ratelimit.headers", false, "add RateLimit-Limit/Remaining/Reset response headers for the descriptor closest to its limit"},
	{"ratelimit.reload_interval", 5 * time.Second, "how often the rate-limit config is checked for changes (a bad reload keeps the previous config)"},
	{"ratelimit.shadow_mode", false, "every rule in shadow mode (envoyproxy/ratelimit's SHADOW_MODE): hits over a limit are counted (ratelimit_over_limit_total, ratelimit_shadow_mode_total) but answered OK, and so is a store failure under failure_mode deny"},
	{"ratelimit.near_limit_ratio", 0.8, "hits admitted above this share of a limit also count as near_limit (ratelimit_near_limit_total), in (0, 1]"},
	{"ratelimit.local_cache_keys", uint32(100_000), "most keys remembered as over their limit until their window resets, refused without asking the store; 0: off"},
	{"ratelimit.max_descriptors", uint32(64), "most descriptors per request; more is InvalidArgument"},
	{"ratelimit.max_entries", uint32(32), "most entries per descriptor; more is InvalidArgument"},
	{"ratelimit.max_value_bytes", uint32(1024), "longest domain, entry key or entry value, in bytes; longer is InvalidArgument"},
	{"ratelimit.criticality.key", "criticality", "descriptor entry key carrying a request's criticality (CRITICAL_PLUS, CRITICAL, SHEDDABLE_PLUS, SHEDDABLE; absent or unknown: CRITICAL); it is removed before matching"},
	{"ratelimit.criticality.adaptive", true, "every rule (but those with `criticality: false`) keeps for the classes above each class the hits they asked for over the last unit of its limit (this replica's requests, scaled by its share of the usage in the store), so lower classes are refused first whatever the mix; traffic without criticality entries is unaffected"},
	{"ratelimit.criticality.enabled", false, "apply ratelimit.criticality.shares to every rule without a criticality setting of its own (off: only rules with `criticality:` reserve headroom, and envoyproxy/ratelimit configs answer as there)"},
	{"ratelimit.criticality.shares.sheddable", 0.7, "share of a limit SHEDDABLE requests may fill, in [0, 1]"},
	{"ratelimit.criticality.shares.sheddable_plus", 0.8, "share of a limit SHEDDABLE_PLUS requests may fill (>= sheddable's)"},
	{"ratelimit.criticality.shares.critical", 0.9, "share of a limit CRITICAL requests may fill (>= sheddable_plus's)"},
	{"ratelimit.criticality.shares.critical_plus", 1.0, "share of a limit CRITICAL_PLUS requests may fill (>= critical's)"},
	{"ratelimit.advertise_address", "", "host:port Envoy uses to reach the rate-limit service (the generated xds-server-ratelimit cluster of listeners' ratelimit filters); empty: ratelimit.address with an empty or unspecified host replaced by 127.0.0.1"},
	{"ratelimit.redis.address", "127.0.0.1:6379", "host:port of the Redis node (ratelimit.store redis)"},
	{"ratelimit.redis.username", "", "Redis ACL user; empty: the default user"},
	{"ratelimit.redis.password", "", "Redis password; empty: no AUTH (prefer the env var XDS_SERVER_RATELIMIT_REDIS_PASSWORD)"},
	{"ratelimit.redis.db", uint32(0), "Redis database number"},
	{"ratelimit.redis.tls", false, "connect to Redis with TLS"},
	{"ratelimit.redis.tls_ca_file", "", "PEM CA bundle that verifies Redis's certificate; empty: the system roots"},
	{"ratelimit.redis.tls_server_name", "", "name Redis's certificate is verified for; empty: the host of ratelimit.redis.address"},
	{"ratelimit.redis.tls_skip_verify", false, "do not verify Redis's certificate (testing only)"},
	{"ratelimit.redis.pool_size", uint32(0), "most Redis connections; 0: 10 per CPU"},
	{"ratelimit.redis.timeout", 250 * time.Millisecond, "bound of one decision's Redis round trip (and of a connection attempt); beyond it the failure mode answers"},
	{"ratelimit.redis.pipelines", uint32(1), "Redis script runs in flight at once; requests arriving meanwhile are decided together in the next run (one round trip for all)"},
	{"ratelimit.redis.key_prefix", "xds-server:rl:", "prefix of every Redis key (empty: fixed-window keys are envoyproxy/ratelimit's own)"},
	{"runtime.heap_floor_mib", uint32(128), "the garbage collector lets the heap grow to this many MiB before collecting, or to twice the live heap when that is more (Go's default); fewer collections at high request rates; 0: Go's default"},
	{"log.level", "info", "log level: debug, info, warn, error"},
	{"log.format", "text", "log format: text or json"},
}

// serviceDefaults are the built-in settings of services."*".
var serviceDefaults = map[string]any{"lb_policy": "round_robin", "connect_timeout": "1s", "subset_size": 0, "subsetting": "steady",
	"protocol": "http1", "locality_weighted_lb": false,
	"weights": map[string]any{"enabled": false, "mode": "global", "sources": []string{"orca", "lrs", "http"}, "orca_port_meta": "orca_port"}}

// serviceKeys are the keys allowed under services.<name>.
var serviceKeys = append([]string{"lb_policy", "connect_timeout", "subset_size", "subsetting",
	"weights.enabled", "weights.mode", "weights.sources", "weights.orca_port_meta", "drain_window"}, clusterServiceKeys...)

// newFlagSet declares --config and one flag per option.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.String("config", "", "YAML config file (flags override env, env overrides the file)")
	for _, o := range options {
		switch d := o.def.(type) {
		case string:
			fs.String(o.key, d, o.help)
		case time.Duration:
			fs.Duration(o.key, d, o.help)
		case uint32:
			fs.Uint32(o.key, d, o.help)
		case float64:
			fs.Float64(o.key, d, o.help)
		case []string:
			fs.StringSlice(o.key, d, o.help)
		case bool:
			fs.Bool(o.key, d, o.help)
		default:
			panic(fmt.Sprintf("option %s: unsupported default type %T", o.key, d))
		}
	}
	return fs
}

// load builds the configuration from defaults, the --config file,
// XDS_SERVER_* env vars and the flags that were set, in increasing
// precedence, and validates it.
func load(fs *pflag.FlagSet) (Config, error) {
	v := viper.New()
	for _, o := range options {
		v.SetDefault(o.key, o.def)
	}
	v.SetDefault("services", map[string]any{"*": serviceDefaults})
	v.SetEnvPrefix(envPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	path, _ := fs.GetString("config")
	if path != "" {
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return Config{}, fmt.Errorf("config: read %s: %w", path, err)
		}
		if err := checkKeys(path); err != nil {
			return Config{}, err
		}
	}
	var flagErr error
	fs.Visit(func(f *pflag.Flag) {
		if f.Name == "config" {
			return
		}
		if err := v.BindPFlag(f.Name, f); err != nil {
			flagErr = errors.Join(flagErr, err)
		}
	})
	if flagErr != nil {
		return Config{}, fmt.Errorf("config: %w", flagErr)
	}
	cfg, err := decode(v)
	if err != nil {
		return Config{}, err
	}
	return cfg, cfg.Validate()
}

// checkKeys rejects keys in the file that no option or service setting
// knows, including empty sections.
func checkKeys(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	known := make(map[string]bool, len(options))
	for _, o := range options {
		known[o.key] = true
	}
	var errs []error
	for _, k := range fileKeys("", doc) {
		if known[k] {
			continue
		}
		if k == "listeners" { // a list: checked by shape (listeners_keys.go)
			errs = append(errs, checkListenerKeys(doc)...)
			continue
		}
		if rest, ok := strings.CutPrefix(k, "services."); ok {
			if slices.ContainsFunc(serviceKeys, func(sk string) bool {
				return strings.HasSuffix(rest, "."+sk) && len(rest) > len(sk)+1
			}) {
				continue
			}
		}
		errs = append(errs, fmt.Errorf("%s: unknown key%s", k, hint(k, known)))
	}
	return errors.Join(errs...)
}

// fileKeys lists the leaf keys of a YAML document as dotted paths, sorted;
// an empty section counts as a leaf. Service names under "services" are
// kept whole even when they contain dots.
func fileKeys(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		key := strings.ToLower(k)
		if prefix != "" {
			key = prefix + "." + key
		}
		sub, ok := v.(map[string]any)
		if !ok || len(sub) == 0 {
			out = append(out, key)
			continue
		}
		out = append(out, fileKeys(key, sub)...)
	}
	slices.Sort(out)
	return out
}

// hint suggests a known key that shares the unknown key's parent section.
func hint(k string, known map[string]bool) string {
	if strings.HasPrefix(k, "services.") {
		return " (allowed under services.<name>: " + strings.Join(serviceKeys, ", ") + ")"
	}
	parent := k[:max(strings.LastIndexByte(k, '.'), 0)]
	var sib []string
	for o := range known {
		if parent != "" && strings.HasPrefix(o, parent+".") {
			sib = append(sib, o)
		}
	}
	if len(sib) == 0 {
		return ""
	}
	slices.Sort(sib)
	return " (known keys here: " + strings.Join(sib, ", ") + ")"
}

func decode(v *viper.Viper) (Config, error) {
	var cfg Config
	err := v.Unmarshal(&cfg, func(dc *mapstructure.DecoderConfig) {
		dc.DecodeHook = mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
		)
		dc.ErrorUnused = true
	})
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if _, ok := cfg.Services["*"]; !ok {
		cfg.Services["*"] = ServiceConfig{}
	}
	star := cfg.Services["*"]
	if star.LBPolicy == "" {
		star.LBPolicy = "round_robin"
	}
	if star.ConnectTimeout == 0 {
		star.ConnectTimeout = time.Second
	}
	if star.SubsetSize == nil {
		star.SubsetSize = new(int)
	}
	if star.Subsetting == "" {
		star.Subsetting = "steady"
	}
	star.Weights = ServiceWeights{Enabled: new(bool), Mode: "global", Sources: weightSources, ORCAPortMeta: "orca_port"}.merge(star.Weights)
	cfg.Services["*"] = star
	return cfg, nil
}
