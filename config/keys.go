package config

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Kind is the type of a key's value.
type Kind int

// The kinds of values. Every source gives them the same syntax: a
// duration needs a unit (50ms, 5s, 1m; 0 alone is fine), a list is a YAML
// list or a comma-separated string.
const (
	String Kind = iota + 1
	Duration
	Uint32 // a whole number in [0, 4294967295]
	Float
	Bool
	List // of strings
	Listeners
	Rules        // xds.authorization.rules: a list of {identities, node_ids, clusters}
	Subsets      // services.<name>.subsets: subset name -> {filter, only_passing}
	HashPolicies // services.<name>.hash_policies: a list of {field, field_value, source_ip, terminal}
)

func (k Kind) String() string {
	return [...]string{"", "string", "duration", "uint32", "float", "bool", "list", "list of listeners", "list of rules", "subsets", "list of hash policies"}[k]
}

// Key is one configuration key: a file key, and (unless it is per service
// or the listeners list) a flag --<Name> and an env var XDS_SERVER_<NAME>.
type Key struct {
	Name    string // dotted path; services.<name>.* are per service, file only
	Kind    Kind
	Default any    // of the kind's Go type (string, time.Duration, uint32, float64, bool, []string); nil: unset
	Help    string // one line of plain text
	Doc     string // README section that explains it (anchor), "" = the key table only
	Secret  bool   // the value is never printed
}

// ServicePrefix starts the per-service keys of the table.
const ServicePrefix = "services.<name>."

// EnvPrefix prefixes every environment variable: xds.address is
// XDS_SERVER_XDS_ADDRESS.
const EnvPrefix = "XDS_SERVER_"

// FileOnly reports whether k has no flag and no env var.
func (k Key) FileOnly() bool {
	return strings.HasPrefix(k.Name, "services.") || k.Kind == Listeners || k.Kind == Rules
}

// Env is the environment variable of k.
func (k Key) Env() string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(k.Name, ".", "_"))
}

// DefaultText renders k's default as it is written in a file.
func (k Key) DefaultText() string {
	switch d := k.Default.(type) {
	case nil:
		return ""
	case time.Duration:
		return formatDuration(d)
	case []string:
		return "[" + strings.Join(d, ", ") + "]"
	default:
		return fmt.Sprint(d)
	}
}

// formatDuration writes d as people write it: 5m, 1s, 250ms.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// k declares a key whose kind follows from its default.
func k(name string, def any, help string, doc ...string) Key {
	var kind Kind
	switch def.(type) {
	case string:
		kind = String
	case time.Duration:
		kind = Duration
	case uint32:
		kind = Uint32
	case float64:
		kind = Float
	case bool:
		kind = Bool
	case []string:
		kind = List
	default:
		panic(fmt.Sprintf("config: key %s: default of type %T", name, def))
	}
	return Key{Name: name, Kind: kind, Default: def, Help: help, Doc: strings.Join(doc, "")}
}

// unset declares a key without a default.
func unset(name string, kind Kind, help string, doc ...string) Key {
	return Key{Name: name, Kind: kind, Help: help, Doc: strings.Join(doc, "")}
}

func secret(key Key) Key { key.Secret = true; return key }

// Keys is the table of every configuration key, in the order of the
// README, --help and examples/xds-server.yaml.
var Keys = []Key{
	k("xds.address", ":18000", "host:port of the xDS (ADS) gRPC listener"),
	k("xds.debounce", 50*time.Millisecond, "quiet time that ends a burst of discovery changes before nodes are updated; a change after such a quiet time is applied at once"),
	k("xds.max_delay", time.Second, "longest a burst of changes may postpone an update"),
	k("xds.node_grace", 5*time.Minute, "keep the snapshot of a disconnected node this long (a reconnect within it is served at once)"),
	k("xds.max_streams", uint32(1000), "concurrent gRPC streams per client connection"),
	k("xds.read_buffer_size", uint32(0), "bytes of the read buffer of each xDS client connection; 0: frames are read straight from the socket (the least memory per node: nodes send little)"),
	k("xds.write_buffer_size", uint32(32<<10), "bytes of the write buffer of each xDS client connection, taken from a shared pool only while a response is written; 0: grpc-go's default (32768)"),
	k("xds.max_pending_bytes", uint32(256<<20), "most bytes of encoded responses waiting to be written to nodes, over all connections: past it a response waits (at most 10s) for others to be written, so a push or a connect storm to many nodes cannot grow memory without bound (xds_pending_response_bytes); 0: no bound", "bounds"),
	k("xds.max_connections", uint32(0), "most client connections the xDS listener holds open; past it a new connection is closed at once (listener_connections_refused_total{listener=\"xds\"}); 0: derived from the open-file limit, at most 20000 (listener_max_connections)", "bounds"),
	k("xds.handshake_timeout", 5*time.Second, "a new xDS connection must finish its TLS handshake and send the HTTP/2 preface within this time, or it is closed (listener_read_timeouts_total{listener=\"xds\"}); at most 2m; 0: 5s", "bounds"),
	k("xds.max_resource_names", uint32(50000), "most resource names of one type one xDS stream subscribes to (a state-of-the-world request naming more, a delta request or stream subscribing to more, is refused with ResourceExhausted: xds_resource_names_refused_total{reason=\"max_resource_names\"}); 0: no bound", "bounds"),
	k("xds.max_unknown_resource_names", uint32(1000), "most resource names a node subscribes to, over all its streams, that its config does not have (each at most 1 KiB; a type not served counts as one): past it the request is refused with ResourceExhausted (xds_resource_names_refused_total{reason=\"max_unknown_resource_names\"}); 0: no bound", "bounds"),
	k("xds.max_known_nodes", uint32(50000), "most nodes known at once, connected or disconnected within xds.node_grace: a new node past it evicts the node disconnected the longest (xds_nodes_evicted_total), or is refused with ResourceExhausted when every known node is connected (xds_nodes_refused_total{reason=\"max_known_nodes\"}); 0: no cap", "bounds"),
	k("xds.sotw_full_state", false, "every state-of-the-world response carries every requested resource of its type (a fallback for clients that read every response as full state); off: load assignment (EDS) and route configuration (RDS) responses carry only the resources that changed, as the xDS spec allows (Envoy and grpc-go apply them per resource), so a change of one service sends one load assignment; cluster and listener responses are always full state"),
	k("xds.shutdown_grace", 5*time.Second, "on SIGTERM, new streams are refused at once and the open ones keep being served (and updated) this long, so clients can reconnect elsewhere", "xds-servers-own-shutdown"),
	k("xds.shutdown_timeout", 10*time.Second, "after the grace, how long closing the streams may take before they are cut"),
	k("xds.keepalive.time", 30*time.Second, "ping a client connection idle this long"),
	k("xds.keepalive.timeout", 10*time.Second, "close a connection whose ping is not answered in this time"),
	k("xds.keepalive.min_time", 10*time.Second, "reject clients that ping more often than this"),
	k("xds.tls.cert_file", "", "PEM certificate (chain) of the xDS listener; with key_file it serves TLS only; reloaded when it changes", "security"),
	k("xds.tls.key_file", "", "PEM private key of xds.tls.cert_file"),
	k("xds.tls.client_ca_file", "", "PEM CA bundle: clients must present a certificate it verifies (mTLS); reloaded when it changes"),
	k("xds.tls.expiry_warning", 14*24*time.Hour, "log a warning this long before the xDS listener's certificate expires (again once a day; at most a third of the certificate's lifetime, so short-lived certificates renewed at half-life never warn); the seconds left are tls_certificate_expiry_seconds. A pair expired or not valid yet is refused: at start, and on reload (the previous pair stays; tls_reloads_total{result=\"error\"})", "security"),
	unset("xds.authorization.rules", Rules, "which client certificate may claim which nodes: a list of {identities, node_ids, clusters} globs (identities match a URI or DNS SAN; absent node_ids or clusters match any); with rules, a stream no rule allows is refused (PermissionDenied); needs xds.tls.client_ca_file; file only", "security"),
	k("admin.address", "127.0.0.1:19000", "host:port of the admin HTTP listener (/healthz, /readyz, /metrics, /debug/*)", "admin-endpoints-adminaddress-loopback-by-default"),
	k("admin.allowed_hosts", []string{}, "Host names the admin port answers besides localhost, IP addresses and the host of admin.address (\"*.example.org\": every name under it; \"*\": any); a request naming another host gets 421 (admin_host_refused_total), against DNS rebinding; /healthz and /readyz answer any", "security"),
	k("admin.max_connections", uint32(0), "most connections the admin listener holds open; past it the connection idle longest is closed (listener_connections_shed_total{listener=\"admin\"}), or the new one when every one is in a request (listener_connections_refused_total); 0: derived from the open-file limit, at most 512", "bounds"),
	k("admin.read_timeout", 30*time.Second, "an admin request (headers and body) must arrive within this time, or its connection is closed", "bounds"),
	k("admin.write_timeout", 2*time.Minute, "an admin response must be written within this time (a CPU profile's seconds must be shorter)"),
	k("admin.idle_timeout", time.Minute, "an idle keep-alive admin connection is closed after this time"),
	k("admin.tls.cert_file", "", "PEM certificate (chain) of the admin listener; with key_file it serves HTTPS only; reloaded when it changes", "security"),
	k("admin.tls.key_file", "", "PEM private key of admin.tls.cert_file"),
	k("admin.tls.client_ca_file", "", "PEM CA bundle: admin clients must present a certificate it verifies (mTLS)"),
	k("admin.tls.expiry_warning", 14*24*time.Hour, "as xds.tls.expiry_warning, for the admin listener's certificate"),
	k("admin.token_file", "", "file holding a bearer token: /v1/*, /json and /debug/* then need Authorization: Bearer <token> (401 otherwise); reloaded when it changes; /healthz, /readyz and /metrics stay open", "security"),
	k("admin.allow_insecure", false, "allow a non-loopback admin.address that asks for neither a bearer token (admin.token_file) nor client certificates (admin.tls.client_ca_file): anyone who reaches it may drain endpoints and read the debug pages", "security"),
	k("discovery.source", "static", "discovery source: static or consul"),
	k("discovery.mass_removal_guard", 0.5, "hold back the removals of a service that loses more than this fraction of its instances (at least 2; all else is applied at once), or a whole update that removes more than this fraction of all instances (an emptied catalog, a truncated file); in (0, 1]; 1: off", "mass-removal-guard"),
	k("discovery.mass_removal_hold", 30*time.Second, "how long such removals (or a whole update) are held before they are applied, each held service on its own clock (a newer update that keeps the instances cancels the hold); 0: off", "mass-removal-guard"),
	k("discovery.mass_removal_window", 5*time.Minute, "removals are measured per service against the most instances it had within this window, so removals a few at a time add up; 0: against the last applied update only", "mass-removal-guard"),
	k("discovery.static.file", "examples/endpoints.yaml", "YAML file of services and endpoints, reloaded on change (the built-in example if this default path does not exist)", "static-endpoints-file"),
	k("discovery.static.poll_interval", time.Second, "how often the static file is checked for changes"),
	k("discovery.consul.address", "127.0.0.1:8500", "Consul HTTP API: host:port, or a URL with http://, https:// or unix://", "using-it-with-consul"),
	secret(k("discovery.consul.token", "", "Consul ACL token; empty: the CONSUL_HTTP_TOKEN env var")),
	k("discovery.consul.token_file", "", "file holding the Consul ACL token (when discovery.consul.token is empty), read again when it changes (a rotated token is used within a second, without a restart); empty: the CONSUL_HTTP_TOKEN_FILE env var, followed the same way", "security"),
	k("discovery.consul.datacenter", "", "Consul datacenter to read; empty: the agent's"),
	k("discovery.consul.datacenters", []string{}, "Consul datacenters to read, the local one first, then failover order, each through the one agent (blocking queries with ?dc=); endpoints of the others get the id <datacenter>/<id>; a datacenter that cannot be read keeps its last known endpoints; empty: discovery.consul.datacenter alone; when both are set, the first must be discovery.consul.datacenter", "several-datacenters"),
	k("discovery.consul.services", []string{}, "only these Consul services; empty: all (but consul)"),
	k("discovery.consul.tags", []string{}, "only service instances that carry all these tags"),
	k("discovery.consul.wait", 5*time.Minute, "blocking query wait time, at most 10m"),
	k("discovery.consul.min_interval", 100*time.Millisecond, "minimum time between two discovery updates (bursts are coalesced)"),
	k("discovery.consul.backoff_base", 250*time.Millisecond, "first retry delay after a Consul error (doubles up to backoff_max, with jitter; reset on success)"),
	k("discovery.consul.backoff_max", 30*time.Second, "longest retry delay after Consul errors"),
	k("discovery.consul.warning_as", "healthy", "an instance with a warning check is healthy (weight = its Weights.Warning) or degraded"),
	k("discovery.consul.tls.ca_file", "", "PEM CA bundle that verifies Consul's HTTPS certificate; empty: the CONSUL_CACERT env var, else the system roots; any discovery.consul.tls key makes a host:port address https", "security"),
	k("discovery.consul.tls.cert_file", "", "PEM client certificate for Consul (verify_incoming); empty: the CONSUL_CLIENT_CERT env var"),
	k("discovery.consul.tls.key_file", "", "PEM private key of discovery.consul.tls.cert_file; empty: the CONSUL_CLIENT_KEY env var"),
	k("discovery.consul.tls.server_name", "", "name Consul's certificate is verified for; empty: the CONSUL_TLS_SERVER_NAME env var, else the address's host"),
	k("discovery.consul.tls.insecure_skip_verify", false, "do not verify Consul's certificate (testing only)"),
	k("discovery.consul.config_entries", true, "read the traffic policy that Consul's config entries hold (service-defaults, service-resolver, service-splitter, service-router) with blocking queries; a rejected entry is logged, counted in xds_policy_rejections_total and shown by validate and the console, and its last good version kept", "traffic-policy-from-consul-config-entries"),

	k("services.<name>.lb_policy", "round_robin", "round_robin, least_request, ring_hash, random or maglev"),
	k("services.<name>.connect_timeout", time.Second, "cluster connect timeout"),
	k("services.<name>.subset_size", uint32(0), "endpoints of the service each node gets; 0: all", "subsetting"),
	k("services.<name>.subsetting", "steady", "steady (low churn) or classic (the SRE book's deterministic subsetting)", "subsetting"),
	k("services.<name>.protocol", "http1", "http1, http2 or grpc: http2 and grpc make Envoy speak HTTP/2 to the endpoints"),
	k("services.<name>.locality_weighted_lb", false, "Envoy picks a locality by its EDS weight first (grpc-go always does)"),
	unset("services.<name>.health_check.enabled", Bool, "Envoy's active health checks are on when the health_check section is present (health_check: {} takes every default); false turns an inherited one off"),
	unset("services.<name>.health_check.path", String, "HTTP GET path of the health check; default /healthz"),
	unset("services.<name>.health_check.grpc", Bool, "grpc.health.v1 instead of HTTP (needs protocol http2 or grpc); default false"),
	unset("services.<name>.health_check.interval", Duration, "time between health checks; default 10s"),
	unset("services.<name>.health_check.timeout", Duration, "health check timeout, at most the interval; default 2s"),
	unset("services.<name>.health_check.unhealthy_threshold", Uint32, "failed checks that make a host unhealthy; default 3"),
	unset("services.<name>.health_check.healthy_threshold", Uint32, "passed checks that make it healthy again; default 2"),
	unset("services.<name>.outlier_detection.enabled", Bool, "passive ejection is on when the outlier_detection section is present (outlier_detection: {} takes every default); false turns an inherited one off"),
	unset("services.<name>.outlier_detection.consecutive_5xx", Uint32, "consecutive 5xx that eject a host; default 5 (grpc-go ignores it)"),
	unset("services.<name>.outlier_detection.interval", Duration, "time between ejection sweeps; default 10s"),
	unset("services.<name>.outlier_detection.base_ejection_time", Duration, "base ejection time; default 30s"),
	unset("services.<name>.outlier_detection.max_ejection_percent", Uint32, "most hosts ejected at once, in percent [0, 100]; default 10, or 100 with a locality failover list or distribute share (so that a whole zone can fail over)"),
	unset("services.<name>.circuit_breakers.max_connections", Uint32, "circuit breaker of the default priority; 0 or absent: Envoy's default"),
	unset("services.<name>.circuit_breakers.max_pending_requests", Uint32, "circuit breaker of the default priority; 0 or absent: Envoy's default"),
	unset("services.<name>.circuit_breakers.max_requests", Uint32, "circuit breaker of the default priority (grpc-go applies it); 0 or absent: Envoy's default"),
	unset("services.<name>.circuit_breakers.max_retries", Uint32, "circuit breaker of the default priority; 0 or absent: Envoy's default"),
	unset("services.<name>.ring_hash.minimum_ring_size", Uint32, "ring size for lb_policy ring_hash; default 1024"),
	unset("services.<name>.ring_hash.maximum_ring_size", Uint32, "largest ring for lb_policy ring_hash; default and limit 8388608"),
	k("services.<name>.weights.enabled", false, "EDS weights of this service follow utilization reports", "weights-from-utilization"),
	k("services.<name>.weights.mode", "global", "global: one weight per endpoint for every node; per_node: each node its own split", "per-node-weights"),
	k("services.<name>.weights.sources", []string{"orca", "lrs", "http"}, "which reports count: orca, lrs, http"),
	k("services.<name>.weights.orca_port_meta", "orca_port", "meta key holding an endpoint's ORCA port (else the service port)"),
	unset("services.<name>.drain_window", Duration, "drain.window for this service", "lame-duck-draining"),
	k("services.<name>.locality.failover", []string{}, "ordered failover levels (zone, region, datacenter): a node gets the endpoints of its zone at priority 0, its region at the next, then its datacenter, then each other datacenter of discovery.consul.datacenters in order; empty: every endpoint of the node's datacenter at priority 0", "zones-and-datacenters"),
	k("services.<name>.locality.distribute", 0.0, "share in [0, 1) of a node's requests kept in its own zone, the rest going to the next level's zones by capacity (locality weights at priority 0); 0: strict priorities", "zones-and-datacenters"),
	k("services.<name>.locality.spill", true, "with weights enabled and a failover list, a zone above weights.overload_threshold spills its excess to the next level by spare capacity, and takes it back below weights.overload_recover", "zones-and-datacenters"),
	unset("services.<name>.subsets", Subsets, "named subsets of the service's instances: subset name -> {filter, only_passing}; filter is Consul's filter language on Service.Tags, Service.Meta.<key>, Service.ID, Service.Address, Service.Port, Node.Node, Node.Datacenter (empty: every instance); only_passing leaves out instances with a warning check; as a service-resolver's Subsets", "traffic-policy-from-consul-config-entries"),
	unset("services.<name>.default_subset", String, "the subset that requests for the service go to when they name none; one of services.<name>.subsets", "traffic-policy-from-consul-config-entries"),
	unset("services.<name>.redirect.service", String, "every request for the service goes to this service instead (as a service-resolver's Redirect); empty: the service itself, with redirect.subset", "traffic-policy-from-consul-config-entries"),
	unset("services.<name>.redirect.subset", String, "the subset of redirect.service (or of the service itself) that the redirect goes to"),
	unset("services.<name>.hash_policies", HashPolicies, "what ring_hash or maglev hashes on: a list of {field (header, cookie or query_parameter), field_value (its name), source_ip, terminal}, as a service-resolver's LoadBalancer.HashPolicies; needs lb_policy ring_hash or maglev", "traffic-policy-from-consul-config-entries"),
	k("services.<name>.unhealthy_split", "redistribute", "a split (service-splitter, or a listener route's split) whose target has no serving endpoint: redistribute sends its share to the split's other targets, in proportion to their weights, until it serves again; keep sends it there anyway (Consul's behaviour)", "traffic-policy-from-consul-config-entries"),
	k("services.<name>.retry_other_split", false, "a policy route that splits and retries (a service-router route with NumRetries or RetryOn whose destination is the splitter) sends each retry to the split's other targets: every target becomes an aggregate cluster of it and then the others (\"web~v2+web~v1\"), and retries leave the clusters and hosts already tried (Envoy's previous_priorities and previous_hosts); an aggregate has the circuit breakers of its first cluster's service, whose max_retries (Envoy's default: 3) bounds the retries in flight; grpc-go follows the aggregate clusters but retries on the cluster it picked", "traffic-policy-from-consul-config-entries"),
	unset("services.<name>.overprovisioning_factor", Uint32, "EDS overprovisioning_factor in percent: Envoy moves traffic to the next priority once healthy hosts x factor fall below 100%; default Envoy's 140 (grpc-go fails over only when a priority has no ready endpoint)", "zones-and-datacenters"),

	k("subsetting.index_source", "local", "where nodes get their client index (and endpoints their slot): local (lowest free index per group, sticky), consul (the same tables in Consul KV, shared by replicas) or metadata (the node's subset.index metadata)", "subsetting"),
	k("subsetting.index_ttl", 10*time.Minute, "a disconnected node's client index (and a departed endpoint's slot) stays reserved for it this long"),
	k("subsetting.group_by", "cluster", "nodes are indexed per group: cluster (the node's cluster), zone, none, or metadata.<key>"),
	k("subsetting.max_groups", uint32(10000), "most subsetting groups of known nodes (connected, or disconnected within xds.node_grace); a node that would start one more is refused with ResourceExhausted (xds_nodes_refused_total{reason=\"max_groups\"}); 0: no cap", "bounds"),
	k("subsetting.consul.prefix", "xds-server/subsetting", "Consul KV prefix of the client index and endpoint slot tables (index_source consul; Consul address and token from discovery.consul.*)"),
	k("weights.update_period", time.Second, "recompute EDS weights from utilization reports this often", "weights-from-utilization"),
	k("weights.min_change", 0.05, "push new weights only when some endpoint's share of its service changed by more than this fraction, in [0, 1)"),
	k("weights.min_push_interval", 5*time.Second, "at most one weight-driven push per this interval"),
	k("weights.blackout_period", 10*time.Second, "a new endpoint's reports count only after it has reported for this long"),
	k("weights.expiration_period", 3*time.Minute, "reports older than this are ignored (the endpoint gets the service's mean weight)"),
	k("weights.smoothing", 0.5, "EWMA factor applied to new weights, in (0, 1]; 1 means no smoothing"),
	k("weights.error_utilization_penalty", 1.0, "cost of errors: weight = qps / (utilization + eps/qps * penalty)"),
	k("weights.overload_threshold", 0.9, "an endpoint whose mean utilization over weights.overload_period is above this sheds weight"),
	k("weights.overload_recover", 0.8, "an overloaded endpoint regains weight only when its mean utilization over weights.overload_period is below this"),
	k("weights.overload_period", 5*time.Second, "the overload guard moves at most once per this period, on the mean utilization reported over it (never on one reading), in proportion to the excess; at least weights.min_push_interval, at most weights.expiration_period", "weights-from-utilization"),
	k("weights.max_ratio", 100.0, "largest over smallest EDS weight within a service"),
	k("weights.orca_interval", time.Second, "ORCA report interval asked of backends"),
	k("weights.lrs_interval", time.Second, "load report interval asked of LRS clients (Envoy, gRPC)"),
	k("weights.balance", true, "global mode: when nodes send LRS, pick the one weight per endpoint that evens out the utilization their subsets and rates predict (false: the formula's weights alone)", "balanced-global-weights"),
	k("weights.per_node_damping", 0.5, "per_node mode: fraction of the way from a node's last weights to the solver's optimum per push, in (0, 1]", "per-node-weights"),
	k("drain.window", 30*time.Second, "an endpoint that leaves discovery stays DRAINING this long before it is removed (0: removed at once); per service: services.<name>.drain_window", "lame-duck-draining"),
	k("drain.meta_key", "lame_duck", "endpoints whose meta value at this key is true (true, 1, yes, on) are DRAINING; empty: off"),
	k("drain.tag", "lame_duck", "endpoints with this tag are DRAINING; empty: off"),
	k("drain.orca_metric", "lame_duck", "endpoints whose ORCA reports carry this named metric >= 1 are DRAINING (services with the orca weights source); empty: off"),
	k("ha.enabled", false, "share admin drains (and load summaries and the weights leader's table) with the other replicas through Consul KV, so every replica serves the same; needs discovery.source consul (Consul address, token and TLS from discovery.consul.*)", "running-several-replicas"),
	k("ha.consul.prefix", "xds-server/", "Consul KV prefix of the replicas' shared state (drains/, weights/); a trailing / is added when missing"),
	k("ha.publish_interval", 5*time.Second, "each replica publishes its load summary to Consul KV at most this often"),
	k("ha.leader_lock_delay", 15*time.Second, "Consul lock-delay of the weights leader's lock: after a leader dies, another takes over within it, in [0s, 1m]"),
	k("ha.alive_ttl", 3*time.Second, "TTL of each replica's alive check on its Consul agent (marked passing every third of it), on which the weights leader's session depends: a leader that dies, or cannot mark it for two thirds of it (paused, starved, a slow agent), loses the lead within it (then ha.leader_lock_delay); in [1s, 20s]"),
	k("ratelimit.address", ":18081", "host:port of the rate-limit service (Envoy RLS v3 gRPC)", "rate-limiting"),
	k("ratelimit.server", "lean", "server behind ratelimit.address: lean (a lean HTTP/2 gRPC server for ShouldRateLimit alone, about 40% less CPU per decision; other methods such as server reflection or the health service, and compressed messages, are answered UNIMPLEMENTED) or grpc (grpc-go, with its gRPC features)", "rate-limiting"),
	k("ratelimit.max_streams", uint32(1024), "most concurrent calls per rate-limit client connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); clients queue the rest; in [1, 1048576]", "bounds-of-the-rate-limit-service"),
	k("ratelimit.max_connections", uint32(0), "most client connections the rate-limit listener holds open; past it a new connection is closed at once (listener_connections_refused_total{listener=\"ratelimit\"}); 0: derived from the open-file limit, at most 5000", "bounds"),
	k("ratelimit.advertise_address", "", "host:port Envoy uses to reach the rate-limit service (the generated xds-server-ratelimit cluster of listeners' ratelimit filters); empty: ratelimit.address with an empty or unspecified host replaced by 127.0.0.1", "listeners-and-routes"),
	k("ratelimit.config", "", "envoyproxy/ratelimit YAML file or directory of them (one domain per file unless ratelimit.merge_domains); empty: no domains, every request is OK"),
	k("ratelimit.merge_domains", false, "merge rate-limit files that share a domain (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG); off: a second file for a domain is an error naming both files"),
	k("ratelimit.allow_empty", false, "accept a ratelimit.config file or directory that defines no domain (every request is then OK); off: that is an error at start, in validate and in ratelimit check, and a reload to it keeps the previous config", "bounds-of-the-rate-limit-service"),
	k("ratelimit.failure_mode", "allow", "when the store fails: allow (fail open) or deny"),
	k("ratelimit.store", "memory", "where counters live: memory (this process) or redis (shared by replicas; ratelimit.redis.*)"),
	k("ratelimit.headers", false, "add RateLimit-Limit/Remaining/Reset response headers for the descriptor closest to its limit"),
	k("ratelimit.reload_interval", 5*time.Second, "how often the rate-limit config is checked for changes (a bad reload keeps the previous config)"),
	k("ratelimit.shadow_mode", false, "every rule in shadow mode (envoyproxy/ratelimit's SHADOW_MODE): hits over a limit are counted (ratelimit_over_limit_total, ratelimit_shadow_mode_total) but answered OK, and so is a store failure under failure_mode deny"),
	k("ratelimit.near_limit_ratio", 0.8, "hits admitted above this share of a limit also count as near_limit (ratelimit_near_limit_total), in (0, 1]"),
	k("ratelimit.local_cache_keys", uint32(100_000), "most keys remembered as over their limit until their window resets, refused without asking the store; 0: off"),
	k("ratelimit.max_descriptors", uint32(64), "most descriptors per request, in [1, 1048576]; more is InvalidArgument"),
	k("ratelimit.max_entries", uint32(32), "most entries per descriptor, in [1, 1048576]; more is InvalidArgument"),
	k("ratelimit.max_value_bytes", uint32(1024), "longest domain, entry key or entry value in bytes, in [1, 1048576]; longer is InvalidArgument"),
	k("ratelimit.tls.cert_file", "", "PEM certificate (chain) of the rate-limit listener; with key_file it serves TLS only; reloaded when it changes", "security"),
	k("ratelimit.tls.key_file", "", "PEM private key of ratelimit.tls.cert_file"),
	k("ratelimit.tls.client_ca_file", "", "PEM CA bundle: rate-limit clients must present a certificate it verifies (mTLS)"),
	k("ratelimit.tls.expiry_warning", 14*24*time.Hour, "as xds.tls.expiry_warning, for the rate-limit listener's certificate"),
	k("ratelimit.authorization.identities", []string{}, "with ratelimit.tls.client_ca_file: only clients whose certificate has a URI or DNS SAN matching one of these globs may call (PermissionDenied otherwise); empty: any verified client", "security"),
	k("ratelimit.criticality.key", "criticality", "descriptor entry key carrying a request's criticality (CRITICAL_PLUS, CRITICAL, SHEDDABLE_PLUS, SHEDDABLE; absent or unknown: CRITICAL); it is removed before matching", "criticality"),
	k("ratelimit.criticality.adaptive", true, "every rule (but those with criticality: false) keeps for the classes above each class the hits they asked for over the last unit of its limit (this replica's requests, scaled by its share of the usage in the store), so lower classes are refused first whatever the mix; traffic without criticality entries is unaffected", "criticality"),
	k("ratelimit.criticality.enabled", false, "apply ratelimit.criticality.shares to every rule without a criticality setting of its own (off: only rules with a criticality setting reserve headroom, and envoyproxy/ratelimit configs answer as there)"),
	k("ratelimit.criticality.shares.sheddable", 0.7, "share of a limit SHEDDABLE requests may fill, in [0, 1]"),
	k("ratelimit.criticality.shares.sheddable_plus", 0.8, "share of a limit SHEDDABLE_PLUS requests may fill (>= sheddable's)"),
	k("ratelimit.criticality.shares.critical", 0.9, "share of a limit CRITICAL requests may fill (>= sheddable_plus's)"),
	k("ratelimit.criticality.shares.critical_plus", 1.0, "share of a limit CRITICAL_PLUS requests may fill (>= critical's)"),
	k("ratelimit.memory.max_keys", uint32(1_000_000), "most keys the memory store holds, at least 64; with max_bytes, its heap stays under about 160 MiB. A full store makes room for a new key by dropping expired keys, else the coldest of a sample: one under half its limit is forgotten, one at half or more is folded into a sketch (a count-min sketch with conservative update: up to 8192 cells of 24 bytes per shard and unit and algorithm in use, counted in max_bytes) that never lets it past its limit; so a flood of new keys evicts its own cold keys, a brand-new key is counted exactly, and a key near its limit is never reset (ratelimit_memory_keys, _bytes, _evictions_total{reason}, _overflow_total)", "bounds-of-the-rate-limit-service"),
	k("ratelimit.memory.max_bytes", uint32(128<<20), "most bytes of keys the memory store holds (key bytes, sliding logs and about 200 bytes of overhead each), at least 1 MiB, at most 4 GiB; see ratelimit.memory.max_keys for what a full store does", "bounds-of-the-rate-limit-service"),
	k("ratelimit.redis.mode", "single", "how Redis is deployed: single (one node: ratelimit.redis.address), cluster (a Redis Cluster found through the seed nodes ratelimit.redis.addresses; each batch runs one script per master (per hash slot when a key has moved), one round trip per master; a master that fails fails only the decisions on its slots) or sentinel (the master that the sentinels at ratelimit.redis.addresses know as ratelimit.redis.sentinel.master_name, followed across failovers)"),
	k("ratelimit.redis.address", "127.0.0.1:6379", "host:port of the Redis node (ratelimit.store redis, mode single)"),
	k("ratelimit.redis.addresses", []string{}, "host:port of a Redis Cluster's seed nodes (mode cluster) or of the sentinels (mode sentinel); required in those modes"),
	k("ratelimit.redis.sentinel.master_name", "", "name the sentinels know the master by (mode sentinel; required there)"),
	secret(k("ratelimit.redis.sentinel.password", "", "the sentinels' own password (mode sentinel); empty: no AUTH with the sentinels (prefer the env var XDS_SERVER_RATELIMIT_REDIS_SENTINEL_PASSWORD)")),
	k("ratelimit.redis.username", "", "Redis ACL user, on every node; empty: the default user"),
	secret(k("ratelimit.redis.password", "", "Redis password, on every node; empty: no AUTH (prefer the env var XDS_SERVER_RATELIMIT_REDIS_PASSWORD)")),
	k("ratelimit.redis.db", uint32(0), "Redis database number, in [0, 2147483647]; 0 in mode cluster"),
	k("ratelimit.redis.tls", false, "connect to Redis (every node and sentinel) with TLS"),
	k("ratelimit.redis.tls_ca_file", "", "PEM CA bundle that verifies Redis's certificate; empty: the system roots"),
	k("ratelimit.redis.tls_server_name", "", "name Redis's certificate is verified for; empty: the host of the address dialled (ratelimit.redis.address, each node's, each sentinel's)"),
	k("ratelimit.redis.tls_skip_verify", false, "do not verify Redis's certificate (testing only)"),
	k("ratelimit.redis.pool_size", uint32(0), "most Redis connections (per node in mode cluster), at most 10000; 0: 10 per CPU"),
	k("ratelimit.redis.timeout", 250*time.Millisecond, "bound of one decision's wait for Redis, from its start: the script run in flight, its own, a connection attempt; beyond it the failure mode answers"),
	k("ratelimit.redis.breaker_failures", uint32(3), "Redis script runs in a row that must fail (time out, lose or not get a connection) to open the circuit breaker: then every decision gets the failure mode at once, without waiting for Redis, until one request probes it after ratelimit.redis.breaker_backoff (ratelimit_redis_breaker_state, _trips_total); mode cluster: a breaker per master, which fails only the decisions on its slots; 0: no breaker", "bounds-of-the-rate-limit-service"),
	k("ratelimit.redis.breaker_backoff", time.Second, "how long an open Redis circuit breaker waits before a request probes Redis; each failed probe doubles it, up to 30s; a successful one closes the breaker", "bounds-of-the-rate-limit-service"),
	k("ratelimit.redis.pipelines", uint32(1), "Redis script runs in flight at once (mode cluster: per master); requests arriving meanwhile are decided together in the next run (one round trip for all)"),
	k("ratelimit.redis.key_prefix", "xds-server:rl:", "prefix of every Redis key (empty: fixed-window keys are envoyproxy/ratelimit's own)"),
	k("ratelimit.redis.per_second.address", "", "host:port of a second Redis node for the limits per second (envoyproxy/ratelimit's REDIS_PERSECOND_URL): set (or, modes cluster and sentinel, ratelimit.redis.per_second.addresses), checks of rules with unit second go there and every other unit to ratelimit.redis, both asked at once; one that fails gives the failure mode to its checks only. Needs ratelimit.store redis; key_prefix, pipelines and the breaker are ratelimit.redis's (a breaker per Redis); empty: one Redis for every unit"),
	k("ratelimit.redis.per_second.mode", "single", "how the per-second Redis is deployed: single (ratelimit.redis.per_second.address), cluster or sentinel (ratelimit.redis.per_second.addresses), as ratelimit.redis.mode"),
	k("ratelimit.redis.per_second.addresses", []string{}, "host:port of the per-second Redis Cluster's seed nodes (mode cluster) or of its sentinels (mode sentinel)"),
	k("ratelimit.redis.per_second.sentinel.master_name", "", "name the per-second Redis's sentinels know its master by (mode sentinel; required there)"),
	secret(k("ratelimit.redis.per_second.sentinel.password", "", "the per-second Redis's sentinels' password (mode sentinel); empty: no AUTH (prefer the env var XDS_SERVER_RATELIMIT_REDIS_PER_SECOND_SENTINEL_PASSWORD)")),
	k("ratelimit.redis.per_second.username", "", "ACL user on the per-second Redis; empty: the default user"),
	secret(k("ratelimit.redis.per_second.password", "", "password of the per-second Redis; empty: no AUTH (prefer the env var XDS_SERVER_RATELIMIT_REDIS_PER_SECOND_PASSWORD)")),
	k("ratelimit.redis.per_second.db", uint32(0), "database number on the per-second Redis, in [0, 2147483647]; 0 in mode cluster"),
	k("ratelimit.redis.per_second.tls", false, "connect to the per-second Redis with TLS"),
	k("ratelimit.redis.per_second.tls_ca_file", "", "PEM CA bundle that verifies the per-second Redis's certificate; empty: the system roots"),
	k("ratelimit.redis.per_second.tls_server_name", "", "name the per-second Redis's certificate is verified for; empty: the host of the address dialled"),
	k("ratelimit.redis.per_second.tls_skip_verify", false, "do not verify the per-second Redis's certificate (testing only)"),
	k("ratelimit.redis.per_second.pool_size", uint32(0), "most connections to the per-second Redis (per node in mode cluster), at most 10000; 0: 10 per CPU"),
	k("ratelimit.redis.per_second.timeout", 250*time.Millisecond, "bound of one decision's wait for the per-second Redis, as ratelimit.redis.timeout"),
	unset("listeners", Listeners, "HTTP listeners and their routes (and rate-limit and admission-control filters) served to the Envoy and proxyless gRPC nodes their nodes globs match; file only", "listeners-and-routes"),
	k("console.history.interval", 10*time.Second, "the web console (/ui/) samples each endpoint's weight and utilization and each service's spread this often, in [1s, 1h]"),
	k("console.history.points", uint32(360), "samples the console keeps per series (with the interval: 360 x 10s is the last hour), in [2, 100000]"),
	k("console.history.max_series", uint32(2000), "services plus endpoints whose history the console keeps; more are not recorded (console_history_series_dropped_total); memory is about 8 bytes x points per series"),
	k("log.level", "info", "log level: debug, info, warn, error"),
	k("log.format", "text", "log format: text or json"),
	k("runtime.memory_limit_mib", uint32(0), "soft limit on the process's memory in MiB (Go's GOMEMLIMIT): near it the garbage collector runs more often and returns free memory to the system, so a connect storm's garbage does not stay resident; set it below the memory the process may use, e.g. 1100 for 10,000 xDS nodes in 1.5 GB; 0: none (the GOMEMLIMIT environment variable, if set, applies)"),
	k("runtime.gc_between_pushes", false, "collect garbage in the quiet after an xDS push (100 ms after its last response, no push under way) when the next push would otherwise start a collection itself, for pushes small against the heap's runway: a collection's mark phase slows every stream's writes (10,000 nodes on 2 cores: the changes that met one took 1.5-2x as long); counted by xds_gc_between_pushes_total; off by default until its interaction with per-node weights (the quick Envoy lab's per-node policy converged in 3 of 6 runs with it on, 6 of 6 off) is understood"),
	k("runtime.release_free_memory", false, "once the process is quiet (at most 2 MiB allocated in 250 ms, twice in a row) after a burst (a connect storm, a full push) left at least 64 MiB and a quarter of the live heap as garbage or free pages, collect and return them to the system at once (debug.FreeOSMemory) instead of keeping them resident until Go's next collection, which a quiet server may not start for minutes; the next collection still comes where the burst's heap goal put it (GOGC held for one cycle); at most once every 30 s; counted by xds_memory_releases_total and xds_memory_released_bytes_total; 10,000 xDS nodes: 150-225 MiB returned after a connect storm, resident memory per node 46-53 KiB against 53-74 KiB, but the pages come back as page faults when the heap grows again (change p99 459-529 ms against 375-447 ms in the same runs): off by default"),
	k("runtime.heap_floor_mib", uint32(128), "the garbage collector lets the heap grow to this many MiB before collecting, or to twice the live heap when that is more (Go's default); fewer collections at high request rates; 0: Go's default"),
}

// Lookup returns the key named name (services.<name>.* under their
// placeholder).
func Lookup(name string) (Key, bool) {
	i := slices.IndexFunc(Keys, func(k Key) bool { return k.Name == name })
	if i < 0 {
		return Key{}, false
	}
	return Keys[i], true
}

// FlagKeys are the keys that are flags and env vars, in table order.
func FlagKeys() []Key {
	var out []Key
	for _, k := range Keys {
		if !k.FileOnly() {
			out = append(out, k)
		}
	}
	return out
}

// serviceKey returns the per-service key at rel (lb_policy,
// health_check.path).
func serviceKey(rel string) (Key, bool) { return Lookup(ServicePrefix + rel) }

// isSection reports whether path (a dotted prefix of a key, like xds or
// xds.keepalive, or health_check under a service with prefix
// services.<name>.) is a section of the table.
func isSection(prefix, path string) bool {
	return slices.ContainsFunc(Keys, func(k Key) bool { return strings.HasPrefix(k.Name, prefix+path+".") })
}
