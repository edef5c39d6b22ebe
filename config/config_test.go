package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/xds-server/xds-server/ratelimit"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "xds-server.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// loadArgs loads the configuration of command-line args (--config FILE
// and key flags) and the process environment, as the binary does.
func loadArgs(t *testing.T, args ...string) (Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	path := fs.String("config", "", "")
	flags := AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	cfg, errs := Load(Sources{File: *path, Env: os.LookupEnv, Flags: flags()})
	return cfg, errs.Err()
}

func TestDefaults(t *testing.T) {
	cfg, err := loadArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.XDS.Address != ":18000" || cfg.Admin.Address != "127.0.0.1:19000" || cfg.Discovery.Source != "static" ||
		cfg.Discovery.Static.File != "examples/endpoints.yaml" || cfg.Discovery.Consul.Address != "127.0.0.1:8500" {
		t.Errorf("defaults: %+v", cfg)
	}
	star := cfg.Services["*"]
	if star.LBPolicy != "round_robin" || star.ConnectTimeout != time.Second {
		t.Errorf(`services."*" = %+v`, star)
	}
}

// TestPrecedence sets the same key in the file, the environment and a flag
// and checks that flag > env > file > default, key by key.
func TestPrecedence(t *testing.T) {
	file := writeConfig(t, `
xds: { address: "127.0.0.1:1001" }
admin: { address: "127.0.0.1:2001" }
discovery:
  source: consul
  consul: { address: "consul-file:8500", services: [a, b], wait: 1m }
log: { level: debug }
`)
	t.Setenv("XDS_SERVER_XDS_ADDRESS", "127.0.0.1:1002")
	t.Setenv("XDS_SERVER_DISCOVERY_CONSUL_ADDRESS", "consul-env:8500")
	t.Setenv("XDS_SERVER_DISCOVERY_CONSUL_TAGS", "x,y")
	t.Setenv("XDS_SERVER_LOG_FORMAT", "json")
	cfg, err := loadArgs(t, "--config", file, "--xds.address", "127.0.0.1:1003", "--discovery.consul.wait=2m")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ got, want any }{
		"flag beats env and file":   {cfg.XDS.Address, "127.0.0.1:1003"},
		"flag beats file (dur)":     {cfg.Discovery.Consul.Wait, 2 * time.Minute},
		"env beats file":            {cfg.Discovery.Consul.Address, "consul-env:8500"},
		"env list":                  {strings.Join(cfg.Discovery.Consul.Tags, ","), "x,y"},
		"env beats default":         {cfg.Log.Format, "json"},
		"file beats default":        {cfg.Admin.Address, "127.0.0.1:2001"},
		"file list":                 {strings.Join(cfg.Discovery.Consul.Services, ","), "a,b"},
		"file level":                {cfg.Log.Level, "debug"},
		"default when nothing sets": {cfg.XDS.NodeGrace, 5 * time.Minute},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %v, want %v", name, tc.got, tc.want)
		}
	}
}

func TestServiceSettings(t *testing.T) {
	file := writeConfig(t, `
services:
  "*": { lb_policy: least_request }
  echo: { lb_policy: ring_hash, connect_timeout: 3s }
`)
	cfg, err := loadArgs(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.ServiceSettings("echo"); s.LBPolicy != "ring_hash" || s.ConnectTimeout != 3*time.Second {
		t.Errorf("echo: %+v", s)
	}
	if s := cfg.ServiceSettings("other"); s.LBPolicy != "least_request" || s.ConnectTimeout != time.Second {
		t.Errorf("other (defaults): %+v", s)
	}
}

func TestWeightSettings(t *testing.T) {
	file := writeConfig(t, `
services:
  "*": { weights: { sources: [orca] } }
  api: { weights: { enabled: true, orca_port_meta: grpc_orca } }
  web: { weights: { enabled: true, sources: [http, lrs] } }
weights: { min_push_interval: 2s, max_ratio: 50 }
`)
	cfg, err := loadArgs(t, "--config", file, "--weights.smoothing", "0.8")
	if err != nil {
		t.Fatal(err)
	}
	api, on := cfg.WeightsOf("api")
	if !on || api.Mode != "global" || strings.Join(api.Sources, ",") != "orca" || api.ORCAPortMeta != "grpc_orca" {
		t.Errorf("api: on=%v %+v", on, api)
	}
	if web, on := cfg.WeightsOf("web"); !on || strings.Join(web.Sources, ",") != "http,lrs" || web.ORCAPortMeta != "orca_port" {
		t.Errorf("web: on=%v %+v", on, web)
	}
	if _, on := cfg.WeightsOf("other"); on {
		t.Error("other: weights on without opting in")
	}
	// grpc-go sends LRS only to a cluster that names an LRS server: a
	// service whose weights take lrs names this server.
	for name, want := range map[string]bool{"api": false, "web": true, "other": false} {
		if got := cfg.ServiceSettings(name).Cluster.LoadReporting; got != want {
			t.Errorf("%s: cluster LoadReporting %v, want %v", name, got, want)
		}
	}
	w := cfg.Weights
	if w.MinPushInterval != 2*time.Second || w.MaxRatio != 50 || w.Smoothing != 0.8 || w.UpdatePeriod != time.Second || w.MinChange != 0.05 {
		t.Errorf("weights: %+v", w)
	}
}

func TestSubsetSettings(t *testing.T) {
	file := writeConfig(t, `
services:
  "*": { subset_size: 10 }
  api: { subsetting: classic }
  small: { subset_size: 0 }
subsetting: { index_source: metadata, index_ttl: 1m, group_by: metadata.team }
`)
	cfg, err := loadArgs(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		size int
		alg  string
	}{
		"api":   {10, "classic"}, // size from "*", algorithm its own
		"small": {0, "steady"},   // 0 overrides "*" (subsetting off)
		"other": {10, "steady"},  // all from "*"; steady is the default
	} {
		if s := cfg.ServiceSettings(name); s.SubsetSize != tc.size || string(s.Subsetting) != tc.alg {
			t.Errorf("%s: subset_size %d, subsetting %q; want %d, %q", name, s.SubsetSize, s.Subsetting, tc.size, tc.alg)
		}
	}
	xc := cfg.ServerConfig().Subsetting
	if xc.IndexSource != "metadata" || xc.IndexTTL != time.Minute || xc.GroupBy != "metadata.team" {
		t.Errorf("subsetting: %+v", xc)
	}
	def, err := loadArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	if d := def.Subsetting; d.IndexSource != "local" || d.IndexTTL != 10*time.Minute || d.GroupBy != "cluster" || d.Consul.Prefix != "xds-server/subsetting" {
		t.Errorf("subsetting defaults: %+v", d)
	}
	if s := def.ServiceSettings("x"); s.SubsetSize != 0 || s.Subsetting != "steady" {
		t.Errorf("service defaults: %+v (want subsetting off, steady)", s)
	}
}

func TestValidationErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		file string
		args []string
		want []string
	}{
		"unknown top-level key":         {file: "xdss: {}\n", want: []string{"xdss: unknown key"}},
		"unknown nested key":            {file: "xds: { adress: ':1' }\n", want: []string{"xds.adress: unknown key", "xds.address"}},
		"unknown section, did you mean": {file: "ratelimt: {}\n", want: []string{"ratelimt: unknown key (did you mean ratelimit?)"}},
		"unknown service key":           {file: "services: { echo: { lb: x } }\n", want: []string{"services.echo.lb: unknown key"}},
		"bad source":                    {file: "discovery: { source: etcd }\n", want: []string{"discovery.source", "etcd"}},
		"bad lb policy":                 {file: "services: { echo: { lb_policy: fastest } }\n", want: []string{"services.echo.lb_policy", "fastest"}},
		"bad address":                   {args: []string{"--xds.address", "nope"}, want: []string{"xds.address"}},
		"bad log level":                 {args: []string{"--log.level", "loud"}, want: []string{"log.level", "loud"}},
		"bad log format":                {file: "log: { format: xml }\n", want: []string{"log.format", "xml"}},
		"bad duration":                  {file: "xds: { debounce: soon }\n", want: []string{"debounce"}},
		"negative duration":             {args: []string{"--xds.node_grace=-1s"}, want: []string{"xds.node_grace", "negative"}},
		"bad consul warning_as":         {file: "discovery: { source: consul, consul: { warning_as: sick } }\n", want: []string{"warning_as"}},
		"two errors both reported":      {file: "log: { format: xml, level: loud }\n", want: []string{"log.format", "log.level"}},
		"negative subset size":          {file: "services: { echo: { subset_size: -1 } }\n", want: []string{"services.echo.subset_size: -1: is not in [0, 4294967295]"}},
		"bad subset size type":          {file: "services: { echo: { subset_size: lots } }\n", want: []string{"subset_size"}},
		"bad subsetting":                {file: "services: { '*': { subsetting: random } }\n", want: []string{"services.*.subsetting", "classic, steady"}},
		"bad index source":              {args: []string{"--subsetting.index_source", "etcd"}, want: []string{"subsetting.index_source", "etcd"}},
		"bad group_by":                  {file: "subsetting: { group_by: rack }\n", want: []string{"subsetting.group_by", "rack"}},
		"negative index ttl":            {args: []string{"--subsetting.index_ttl=-1m"}, want: []string{"subsetting.index_ttl", "negative"}},
		"unknown subsetting key":        {file: "subsetting: { size: 3 }\n", want: []string{"subsetting.size: unknown key"}},
		"unknown weights key":           {file: "services: { api: { weights: { enable: true } } }\n", want: []string{"services.api.weights.enable: unknown key"}},
		"bad weights mode":              {file: "services: { api: { weights: { mode: local } } }\n", want: []string{"services.api.weights.mode", "local"}},
		"unknown weights mode":          {file: "services: { api: { weights: { mode: per_endpoint } } }\n", want: []string{"services.api.weights.mode", "per_endpoint"}},
		"bad per-node damping":          {file: "weights: { per_node_damping: 1.5 }\n", want: []string{"weights.per_node_damping", "damping"}},
		"bad drain window":              {file: "services: { api: { drain_window: soon } }\n", want: []string{"services.api.drain_window", "soon"}},
		"negative drain window":         {file: "drain: { window: -1s }\n", want: []string{"drain.window", "negative"}},
		"console history out of range":  {file: "console: { history: { interval: 100ms, points: 1, max_series: 0 } }\n", want: []string{"console.history.interval: 100ms: is not in [1s, 1h]", "console.history.points: 1: is not in [2, 100000]", "console.history.max_series: 0"}},
		"negative shutdown grace":       {file: "xds: { shutdown_grace: -1s }\n", want: []string{"xds.shutdown_grace", "negative"}},
		"bad weights source":            {file: "services: { api: { weights: { sources: [orca, snmp] } } }\n", want: []string{"services.api.weights.sources", "snmp"}},
		"bad smoothing":                 {args: []string{"--weights.smoothing", "0"}, want: []string{"weights", "smoothing"}},
		"bad min change":                {file: "weights: { min_change: 2 }\n", want: []string{"weights.min_change"}},
		"zero overload period":          {file: "weights: { overload_period: 0s }\n", want: []string{"weights.overload_period: 0s: is not in (0, weights.expiration_period]"}},
		"overload period past expiry":   {file: "weights: { overload_period: 5m }\n", want: []string{"weights.overload_period: 5m: is not in (0, weights.expiration_period]"}},
		"bad overload marks":            {file: "weights: { overload_threshold: 0.5, overload_recover: 0.7 }\n", want: []string{"weights.overload_recover: 0.7: is not in (0, 0.5]"}},
		"zero update period":            {args: []string{"--weights.update_period=0s"}, want: []string{"weights.update_period", "positive"}},
		"bad ratelimit store":           {args: []string{"--ratelimit.store", "etcd"}, want: []string{"ratelimit.store", "etcd"}},
		"bad ratelimit server":          {args: []string{"--ratelimit.server", "http"}, want: []string{"ratelimit.server: http: is not one of grpc, lean"}},
		"zero ratelimit streams":        {args: []string{"--ratelimit.max_streams", "0"}, want: []string{"ratelimit.max_streams: 0: is not in [1, 1048576]"}},
		"bad redis address":             {args: []string{"--ratelimit.store", "redis", "--ratelimit.redis.address", "nope"}, want: []string{"ratelimit.redis.address", "nope"}},
		"zero redis timeout":            {args: []string{"--ratelimit.store", "redis", "--ratelimit.redis.timeout", "0s"}, want: []string{"ratelimit.redis.timeout", "positive"}},
		"redis tls file, no tls":        {file: "ratelimit: { store: redis, redis: { tls_ca_file: ca.pem } }\n", want: []string{"ratelimit.redis.tls_ca_file", "needs ratelimit.redis.tls"}},
		"missing redis ca file":         {file: "ratelimit: { store: redis, redis: { tls: true, tls_ca_file: /nonexistent/ca.pem } }\n", want: []string{"ratelimit.redis.tls_ca_file", "/nonexistent/ca.pem"}},
		"unknown redis key":             {file: "ratelimit: { redis: { adress: 'r:1' } }\n", want: []string{"ratelimit.redis.adress: unknown key", "ratelimit.redis.address"}},
		"bad redis db":                  {file: "ratelimit: { redis: { db: -1 } }\n", want: []string{"db"}},
		"zero near limit ratio":         {args: []string{"--ratelimit.near_limit_ratio", "0"}, want: []string{"ratelimit.near_limit_ratio", "(0, 1]"}},
		"near limit ratio above 1":      {file: "ratelimit: { near_limit_ratio: 1.5 }\n", want: []string{"ratelimit.near_limit_ratio", "1.5"}},
		"zero max descriptors":          {args: []string{"--ratelimit.max_descriptors", "0"}, want: []string{"ratelimit.max_descriptors", "0"}},
		"empty criticality key":         {file: "ratelimit: { criticality: { key: '' } }\n", want: []string{"ratelimit.criticality.key", "empty"}},
		"decreasing shares":             {file: "ratelimit: { criticality: { shares: { critical: 0.5 } } }\n", want: []string{"ratelimit.criticality.shares.critical: 0.5: is below ratelimit.criticality.shares.sheddable_plus (0.8)"}},
		"share above 1":                 {args: []string{"--ratelimit.criticality.shares.critical_plus", "1.2"}, want: []string{"ratelimit.criticality.shares.critical_plus: 1.2: is not in [0, 1]"}},
		"unknown criticality key":       {file: "ratelimit: { criticality: { keys: x } }\n", want: []string{"ratelimit.criticality.keys: unknown key"}},
	} {
		t.Run(name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config", writeConfig(t, tc.file)}, args...)
			}
			_, err := loadArgs(t, args...)
			if err == nil {
				t.Fatal("invalid configuration accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// The redis store's settings: file, env (the password) and defaults.
func TestRateLimitRedisSettings(t *testing.T) {
	file := writeConfig(t, `
ratelimit:
  store: redis
  failure_mode: deny
  redis: { address: "redis.internal:6380", username: rl, db: 2, tls: true, tls_server_name: redis.internal, pool_size: 32, timeout: 100ms, key_prefix: "edge:", breaker_failures: 0, breaker_backoff: 2s }
`)
	t.Setenv("XDS_SERVER_RATELIMIT_REDIS_PASSWORD", "from-env")
	cfg, err := loadArgs(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	want := RedisConfig{RedisConnection: RedisConnection{Mode: "single", Address: "redis.internal:6380", Username: "rl", Password: "from-env", DB: 2, TLS: true,
		TLSServerName: "redis.internal", PoolSize: 32, Timeout: 100 * time.Millisecond}, KeyPrefix: "edge:", Pipelines: 1,
		BreakerBackoff: 2 * time.Second}
	if got := cfg.RateLimit.Redis; !sameRedis(got, want) {
		t.Errorf("ratelimit.redis:\n got  %+v\n want %+v", got, want)
	}
	if s := cfg.RateLimit.Redis.Store(); s.Address != want.Address || s.DB != 2 || s.PoolSize != 32 || s.Password != "from-env" ||
		!s.TLS || s.TLSServerName != "redis.internal" || s.Timeout != 100*time.Millisecond || s.KeyPrefix != "edge:" ||
		s.BreakerFailures >= 0 || s.BreakerBackoff != 2*time.Second {
		t.Errorf("store config: %+v", s)
	}
	t.Setenv("XDS_SERVER_RATELIMIT_REDIS_PASSWORD", "")
	def, err := loadArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	if d := def.RateLimit.Redis; !sameRedis(d, RedisConfig{RedisConnection: RedisConnection{Mode: "single", Address: "127.0.0.1:6379", Timeout: 250 * time.Millisecond}, KeyPrefix: "xds-server:rl:", Pipelines: 1,
		BreakerFailures: 3, BreakerBackoff: time.Second}) {
		t.Errorf("ratelimit.redis defaults: %+v", d)
	}
	if s := def.RateLimit.Redis.Store(); s.BreakerFailures != 3 || s.BreakerBackoff != time.Second {
		t.Errorf("store config defaults: %+v", s)
	}
	if def.RateLimit.Store != "memory" {
		t.Errorf("ratelimit.store default %q", def.RateLimit.Store)
	}
}

// sameRedis compares two ratelimit.redis sections (no addresses: nil or
// empty).
// A zero b.PerSecond stands for its defaults (no per-second Redis).
func sameRedis(a, b RedisConfig) bool {
	if len(a.Addresses) == 0 && len(b.Addresses) == 0 {
		a.Addresses, b.Addresses = nil, nil
	}
	if len(a.PerSecond.Addresses) == 0 && len(b.PerSecond.Addresses) == 0 {
		a.PerSecond.Addresses, b.PerSecond.Addresses = nil, nil
	}
	if reflect.ValueOf(b.PerSecond).IsZero() {
		b.PerSecond = RedisConnection{Mode: "single", Timeout: 250 * time.Millisecond}
	}
	return reflect.DeepEqual(a, b)
}

// The rate-limit service's settings reach ratelimit.ServiceConfig; the
// defaults are the package's.
func TestRateLimitServiceSettings(t *testing.T) {
	def, err := loadArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	d := def.RateLimit.Service()
	if d.NearLimitRatio != ratelimit.DefaultNearLimitRatio || d.ShadowMode || d.OverLimitKeys != ratelimit.DefaultOverLimitKeys ||
		d.MaxDescriptors != ratelimit.DefaultMaxDescriptors || d.MaxEntries != ratelimit.DefaultMaxEntries ||
		d.MaxValueBytes != ratelimit.DefaultMaxValueBytes || d.Criticality.Key != ratelimit.DefaultCriticalityKey ||
		d.Criticality.Enabled || d.Criticality.StaticOnly || d.Criticality.Shares != ratelimit.DefaultShares {
		t.Errorf("defaults: %+v", d)
	}
	file := writeConfig(t, `
ratelimit:
  near_limit_ratio: 0.5
  shadow_mode: true
  local_cache_keys: 0
  max_descriptors: 4
  criticality: { key: prio, enabled: true, adaptive: false, shares: { sheddable: 0.5, sheddable_plus: 0.6 } }
`)
	cfg, err := loadArgs(t, "--config", file, "--ratelimit.max_entries", "3", "--ratelimit.criticality.shares.critical", "0.75")
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.RateLimit.Service()
	if s.NearLimitRatio != 0.5 || !s.ShadowMode || s.OverLimitKeys >= 0 || s.MaxDescriptors != 4 || s.MaxEntries != 3 ||
		s.MaxValueBytes != ratelimit.DefaultMaxValueBytes || s.Criticality.Key != "prio" || !s.Criticality.Enabled || !s.Criticality.StaticOnly ||
		s.Criticality.Shares != (ratelimit.Shares{0.5, 0.6, 0.75, 1}) {
		t.Errorf("set: %+v", s)
	}
	if err := s.Validate(); err == nil { // no store
		t.Error("a service config without a store validates")
	}
}

func TestDrainWindowPerService(t *testing.T) {
	cfg, err := loadArgs(t, "--config", writeConfig(t, "services: { api: { drain_window: 5s }, web: { drain_window: 0s } }\n"))
	if err != nil {
		t.Fatal(err)
	}
	for svc, want := range map[string]time.Duration{"api": 5 * time.Second, "API": 5 * time.Second, "web": 0, "other": 30 * time.Second} {
		if got := cfg.DrainWindow(svc); got != want {
			t.Errorf("DrainWindow(%s) = %v, want %v", svc, got, want)
		}
	}
}

// TestSurface: the configuration surface as a user meets it, each case
// with the exact list of problems (or none).
func TestSurface(t *testing.T) {
	for name, tc := range map[string]struct {
		file string
		env  map[string]string
		args []string
		want []string // every problem, in order; nil = valid
	}{
		"empty service entry":           {file: "services: { api: {} }\n"},
		"empty services":                {file: "services: {}\n"},
		"empty ratelimit section":       {file: "ratelimit: {}\n"},
		"empty keepalive":               {file: "xds: { keepalive: {} }\n"},
		"null section":                  {file: "xds:\nlog:\n"},
		"empty health_check":            {file: "services: { api: { health_check: {} } }\n"},
		"empty outlier_detection":       {file: "services: { '*': { outlier_detection: {} } }\n"},
		"empty file":                    {file: "\n"},
		"unit-less duration, file":      {file: "xds: { debounce: 50 }\n", want: []string{"xds.debounce: 50: a duration needs a unit (like 50ms, 5s or 1m)"}},
		"unit-less duration, env":       {env: map[string]string{"XDS_SERVER_XDS_DEBOUNCE": "50"}, want: []string{"xds.debounce: 50: a duration needs a unit (like 50ms, 5s or 1m)"}},
		"unit-less duration, flag":      {args: []string{"--xds.debounce", "50"}, want: []string{"xds.debounce: 50: a duration needs a unit (like 50ms, 5s or 1m)"}},
		"zero duration without unit":    {file: "drain: { window: 0 }\n"},
		"fractional unit-less":          {file: "xds: { max_delay: 1.5 }\n", want: []string{"xds.max_delay: 1.5: a duration needs a unit (like 50ms, 5s or 1m)"}},
		"not a duration":                {file: "xds: { debounce: soon }\n", want: []string{"xds.debounce: soon: is not a duration (like 50ms, 5s or 1m)"}},
		"number out of range":           {file: "xds: { max_streams: -1 }\n", want: []string{"xds.max_streams: -1: is not in [0, 4294967295]"}},
		"read buffer over 1 MiB":        {file: "xds: { read_buffer_size: 2097152 }\n", want: []string{"xds.read_buffer_size: 2097152: is more than 1048576 (1 MiB): larger buffers only cost memory per node"}},
		"float out of range":            {args: []string{"--ratelimit.near_limit_ratio", "2"}, want: []string{"ratelimit.near_limit_ratio: 2: is not in (0, 1]"}},
		"not a number":                  {env: map[string]string{"XDS_SERVER_WEIGHTS_SMOOTHING": "half"}, want: []string{"weights.smoothing: half: is not a number"}},
		"unknown key, did you mean":     {file: "xds: { adress: ':1' }\n", want: []string{"xds.adress: unknown key (did you mean xds.address?)"}},
		"unknown section, did you mean": {file: "ratelimt: {}\n", want: []string{"ratelimt: unknown key (did you mean ratelimit?)"}},
		"unknown service key":           {file: "services: { api: { lb_polcy: x } }\n", want: []string{"services.api.lb_polcy: unknown key (did you mean lb_policy?)"}},
		"section given a value":         {file: "xds: 5\n", want: []string{"xds: 5: is a value, want a section of address, debounce, max_delay, node_grace, max_streams, read_buffer_size, write_buffer_size, max_pending_bytes, max_connections, handshake_timeout, max_resource_names, max_unknown_resource_names, max_known_nodes, sotw_full_state, shutdown_grace, shutdown_timeout, keepalive, tls, authorization"}},
		"value given a section":         {file: "xds: { address: { host: x } }\n", want: []string{"xds.address: {...}: is a section, want a string"}},
		"list as a comma string, env":   {env: map[string]string{"XDS_SERVER_DISCOVERY_CONSUL_SERVICES": "a, b"}},
		"secret value never shown":      {file: "discovery: { consul: { token: [a] } }\n", want: []string{"discovery.consul.token: (redacted): is a list, want a string"}},
		"all at once, sorted by key": {file: "xds: { debounce: 50 }\nlog: { level: loud }\nadmin: { adress: x }\n", args: []string{"--weights.smoothing", "0"},
			want: []string{"admin.adress: unknown key (did you mean admin.address?)", "log.level: loud: is not one of debug, info, warn, error",
				"weights.smoothing: 0: is not in (0, 1]", "xds.debounce: 50: a duration needs a unit (like 50ms, 5s or 1m)"}},
		"flag over env over file": {file: "log: { level: warn }\n", env: map[string]string{"XDS_SERVER_LOG_LEVEL": "nope"}, args: []string{"--log.level", "error"}},
	} {
		t.Run(name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config", writeConfig(t, tc.file)}, args...)
			}
			_, err := loadArgs(t, args...)
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("problems:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestEmptySectionsTakeDefaults: health_check: {} turns health checks on
// with their defaults; services: { api: {} } is api with the "*" settings.
func TestEmptySectionsTakeDefaults(t *testing.T) {
	cfg, err := loadArgs(t, "--config", writeConfig(t, "services: { api: { health_check: {} }, web: {} }\n"))
	if err != nil {
		t.Fatal(err)
	}
	if hc := cfg.ServiceSettings("api").Cluster.HealthCheck; !hc.Enabled {
		t.Errorf("api health check: %+v, want on", hc)
	}
	if hc := cfg.ServiceSettings("web").Cluster.HealthCheck; hc.Enabled {
		t.Errorf("web health check: %+v, want off", hc)
	}
	if got, want := cfg.Service("web"), cfg.Service("*"); !reflect.DeepEqual(got, want) {
		t.Errorf("web: %+v, want the * settings %+v", got, want)
	}
}

// ratelimit.memory bounds reach the memory store; too small ones are
// errors naming the key.
func TestRateLimitMemorySettings(t *testing.T) {
	def, err := loadArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	if s := def.RateLimit.Memory.Store(); s.MaxKeys != ratelimit.DefaultMemoryMaxKeys || s.MaxBytes != ratelimit.DefaultMemoryMaxBytes ||
		s.SweepInterval != ratelimit.DefaultMemorySweepInterval {
		t.Errorf("defaults: %+v", s)
	}
	cfg, err := loadArgs(t, "--ratelimit.memory.max_keys", "5000", "--ratelimit.memory.max_bytes", "8388608")
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.RateLimit.Memory.Store(); s.MaxKeys != 5000 || s.MaxBytes != 8<<20 {
		t.Errorf("flags not passed on: %+v", s)
	}
	if err := s0(ratelimit.NewMemory(cfg.RateLimit.Memory.Store())); err != nil {
		t.Errorf("NewMemory refused the config's bounds: %v", err)
	}
	_, err = loadArgs(t, "--ratelimit.memory.max_keys", "10", "--ratelimit.memory.max_bytes", "1000")
	for _, want := range []string{"ratelimit.memory.max_keys: 10: is below 64", "ratelimit.memory.max_bytes: 1000: is below 1048576"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to contain %q", err, want)
		}
	}
}

// s0 is the error of a constructor, closing what it made.
func s0(m *ratelimit.Memory, err error) error {
	if m != nil {
		m.Close()
	}
	return err
}
