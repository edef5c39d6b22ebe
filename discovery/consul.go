package discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/consulstate"
)

// Defaults of ConsulConfig.
const (
	DefaultConsulAddress     = consulstate.DefaultAddress
	DefaultConsulWait        = 5 * time.Minute
	DefaultConsulMinInterval = 100 * time.Millisecond
	DefaultConsulBackoffBase = 250 * time.Millisecond
	DefaultConsulBackoffMax  = 30 * time.Second

	// maxConsulWait is the longest wait Consul honors for a blocking query.
	maxConsulWait = 10 * time.Minute
	consulSource  = "consul" // the source label of the metrics
)

// ConsulConfig configures the Consul source. The zero value watches every
// service of the local agent's datacenter at 127.0.0.1:8500.
type ConsulConfig struct {
	// Address is the host:port of the Consul HTTP API, optionally with an
	// "http://", "https://" or "unix://" scheme; "" means 127.0.0.1:8500.
	Address string
	// Token is the ACL token; "" falls back to TokenFile, then to the
	// CONSUL_HTTP_TOKEN and CONSUL_HTTP_TOKEN_FILE env vars.
	Token string
	// TokenFile holds the ACL token when Token is empty. It is read at
	// start (an unreadable file is an error then) and again whenever it
	// changes, so a rotated token is used without a restart.
	TokenFile string
	// TLS configures HTTPS to Consul (see ConsulTLS).
	TLS ConsulTLS
	// Datacenter to read; "" means the agent's datacenter.
	Datacenter string
	// Datacenters lists the datacenters to read, the local one first, then
	// the others in failover order; empty means Datacenter alone. When both
	// are set, Datacenters[0] must be Datacenter. Every service is read
	// from each of them through the one agent (Consul forwards over the
	// WAN). Names are unique and not empty.
	Datacenters []string
	// Services lists the service names to watch; empty means all. The
	// "consul" service itself is always skipped.
	Services []string
	// Tags keeps only the service instances carrying all of these tags.
	Tags []string
	// Wait is the blocking query wait, in (0, 10m]; 0 means 5m.
	Wait time.Duration
	// MinInterval is the minimum time between two emitted snapshots (bursts
	// of changes are coalesced into one snapshot) and between two queries of
	// one blocking loop; 0 means 100ms.
	MinInterval time.Duration
	// BackoffBase is the first retry delay after an error; 0 means 250ms.
	BackoffBase time.Duration
	// BackoffMax caps the retry delay, >= BackoffBase; 0 means 30s.
	BackoffMax time.Duration
	// WarningAs is the state of an instance with a warning check: "healthy"
	// (the default; its weight is the service's Weights.Warning) or
	// "degraded" (same weight).
	WarningAs string
	// Logger receives the source's logs; nil means slog.Default(). The
	// attribute component=discovery.consul is added.
	Logger *slog.Logger
	// Metrics records errors, staleness and snapshots; may be nil.
	Metrics *Metrics
	// OnRead, if set, is called just before each emitted snapshot with
	// the read of the first change it brings (Read): the start of a
	// change's path, for xds's stage metrics. It must not block.
	OnRead func(Read)
	// Now is the clock of the last-update metric; nil means time.Now.
	// Timers (rate limit, backoff) always use real time.
	Now func() time.Time
}

// Validate reports every problem of c, joined.
func (c ConsulConfig) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("discovery: consul: %s: "+format, append([]any{field}, args...)...))
	}
	if err := CheckConsulAddress(c.Address); err != nil {
		bad("Address", "%v", err)
	}
	if c.Wait < 0 || c.Wait > maxConsulWait {
		bad("Wait", "%v outside [0, %v]", c.Wait, maxConsulWait)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"MinInterval", c.MinInterval}, {"BackoffBase", c.BackoffBase}, {"BackoffMax", c.BackoffMax}} {
		if f.d < 0 {
			bad(f.name, "%v is negative", f.d)
		}
	}
	if base, ceiling := cmp.Or(c.BackoffBase, DefaultConsulBackoffBase), cmp.Or(c.BackoffMax, DefaultConsulBackoffMax); c.BackoffBase >= 0 && c.BackoffMax >= 0 && ceiling < base {
		bad("BackoffMax", "%v is below BackoffBase %v", ceiling, base)
	}
	switch c.WarningAs {
	case "", "healthy", "degraded":
	default:
		bad("WarningAs", "%q is not one of healthy, degraded", c.WarningAs)
	}
	for i, s := range c.Services {
		if strings.TrimSpace(s) == "" {
			bad("Services", "entry %d is empty", i)
		}
	}
	for i, t := range c.Tags {
		if strings.TrimSpace(t) == "" {
			bad("Tags", "entry %d is empty", i)
		}
	}
	for _, p := range DatacenterProblems(c.Datacenter, c.Datacenters) {
		bad("Datacenters", "%s", p)
	}
	return errors.Join(errs...)
}

// DatacenterProblems says what is wrong with a datacenter list, one reason
// each: an empty name, a name listed twice, or a first entry (the local
// datacenter) other than datacenter when datacenter is set. None: nil.
func DatacenterProblems(datacenter string, list []string) []string {
	var out []string
	for i, dc := range list {
		if strings.TrimSpace(dc) == "" {
			out = append(out, fmt.Sprintf("entry %d is empty", i))
		} else if j := slices.Index(list, dc); j < i {
			out = append(out, fmt.Sprintf("entry %d (%q) repeats entry %d", i, dc, j))
		}
	}
	if datacenter != "" && len(list) > 0 && list[0] != datacenter {
		out = append(out, fmt.Sprintf("the first entry %q (the local datacenter) is not the datacenter %q (discovery.consul.datacenter): list the local datacenter first", list[0], datacenter))
	}
	return out
}

// datacenters are the datacenters read, the local one first: Datacenters,
// or Datacenter alone ("" meaning the agent's).
func (c ConsulConfig) datacenters() []string {
	if len(c.Datacenters) > 0 {
		return c.Datacenters
	}
	return []string{c.Datacenter}
}

// CheckConsulAddress accepts "", host:port, or a URL with scheme http,
// https (host:port) or unix (a socket path).
func CheckConsulAddress(addr string) error {
	if addr == "" {
		return nil
	}
	scheme, rest, ok := strings.Cut(addr, "://")
	if !ok {
		scheme, rest = "http", addr
	}
	switch scheme {
	case "unix":
		if rest == "" {
			return fmt.Errorf("%q has no socket path", addr)
		}
		return nil
	case "http", "https":
	default:
		return fmt.Errorf("%q: unknown scheme %q (want http, https or unix)", addr, scheme)
	}
	rest, _, _ = strings.Cut(rest, "/") // a path prefix is allowed
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || host == "" {
		return fmt.Errorf("%q needs a host and a port in [1, 65535]", addr)
	}
	return nil
}

// Consul is the Consul discovery source: one blocking query loop on the
// catalog's service list and one on the health of each watched service (all
// instances, passing or not). Each instance becomes an Endpoint: ID is the
// Consul service ID, or "<node>/<service ID>" for every instance whose
// service ID is registered on several nodes; Address is the service address,
// else the node address; Meta and Tags are the service's; Locality comes from
// LocalityFrom with the node's datacenter as the default region; Health and
// Weight follow the checks (maintenance: draining; critical: unhealthy;
// warning: healthy or degraded with Weights.Warning; else healthy with
// Weights.Passing). A listed service without matching instances has no
// endpoints. Datacenter is the node's datacenter.
//
// With several datacenters (ConsulConfig.Datacenters), the service list and
// each service are read from every one of them, and a service's endpoints
// are the union over the datacenters, sorted by id. The endpoints of the
// first (local) datacenter keep the ids above; those of every other
// datacenter are named "<datacenter>/<id>" (what drains and the debug
// pages refer to them by). Where two datacenters list the same
// address:port, the earlier datacenter's endpoint is kept. See Run.
type Consul struct {
	cfg       ConsulConfig // defaults applied
	client    *api.Client
	log       *slog.Logger
	warningAs Health
	rnd       func() float64 // in [0, 1): backoff jitter
}

var _ Source = (*Consul)(nil)

// NewConsul validates cfg, applies its defaults and creates the source. It
// does not contact Consul.
func NewConsul(cfg ConsulConfig) (*Consul, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Address = cmp.Or(cfg.Address, DefaultConsulAddress)
	cfg.Wait = cmp.Or(cfg.Wait, DefaultConsulWait)
	cfg.MinInterval = cmp.Or(cfg.MinInterval, DefaultConsulMinInterval)
	cfg.BackoffBase = cmp.Or(cfg.BackoffBase, DefaultConsulBackoffBase)
	cfg.BackoffMax = cmp.Or(cfg.BackoffMax, DefaultConsulBackoffMax)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default()).With("component", "discovery.consul")
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	client, err := cfg.ConsulClient()
	if err != nil {
		return nil, err
	}
	c := &Consul{cfg: cfg, client: client, log: cfg.Logger, warningAs: HealthHealthy, rnd: rand.Float64}
	if cfg.WarningAs == "degraded" {
		c.warningAs = HealthDegraded
	}
	return c, nil
}

// Run watches Consul until ctx is done, then returns nil. It emits a
// snapshot once every watched service has been read once (never a partial
// first view), and afterwards whenever the content changes, at most once per
// MinInterval (changes in between are coalesced). Services appear and
// disappear as the catalog lists them; a service added later joins the
// snapshots once its health has been read. Errors are retried with backoff
// and never remove endpoints: the last known state is kept (and the source
// marked stale in the metrics) until Consul answers again. With several
// datacenters, each is read and kept apart: one that cannot be read keeps
// its last known endpoints (and is marked stale in the per-datacenter
// metrics, with a log line when it becomes stale and when it recovers)
// while the others' changes flow; the first snapshot waits for the local
// datacenter and for every other one that answers. Run must not be
// called again before it returned.
func (c *Consul) Run(ctx context.Context, emit func(Snapshot)) error {
	if emit == nil {
		return errors.New("discovery: consul: Run: emit is nil")
	}
	r := newConsulRun(ctx, c, emit)
	defer r.stop()
	r.start()
	r.run()
	return nil
}
