package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/xds-server/xds-server/ha"
)

// HAConfig configures high availability (the ha: section): several
// replicas sharing drains and weights through Consul KV.
type HAConfig struct {
	Enabled         bool          `mapstructure:"enabled"`           // share state with the other replicas through Consul
	PublishInterval time.Duration `mapstructure:"publish_interval"`  // at most one load summary per replica per this
	LeaderLockDelay time.Duration `mapstructure:"leader_lock_delay"` // Consul lock-delay of the weights leader's session
	AliveTTL        time.Duration `mapstructure:"alive_ttl"`         // TTL of the replica's alive check, in the leader's session
	Consul          struct {
		Prefix string `mapstructure:"prefix"` // KV prefix of every shared key; ends with "/"
	} `mapstructure:"consul"`
}

// maxLockDelay is Consul's own bound on a session's lock-delay.
const maxLockDelay = time.Minute

// validateHA checks the ha section; HA needs Consul discovery (its KV is
// the shared state).
func (c Config) validateHA(p *problems) {
	h := c.HA
	if h.Enabled && c.Discovery.Source != "consul" {
		p.bad("ha.enabled", h.Enabled, "needs discovery.source: consul (replicas share their state in Consul KV)")
	}
	if h.Enabled && c.Subsetting.IndexSource == "local" {
		p.bad("subsetting.index_source", c.Subsetting.IndexSource, "with ha.enabled, replicas need one table of client indices "+
			"and endpoint slots, or they send the same node different subsets: use consul (or metadata)")
	}
	if h.PublishInterval <= 0 {
		p.bad("ha.publish_interval", h.PublishInterval, "must be positive")
	}
	if h.LeaderLockDelay < 0 || h.LeaderLockDelay > maxLockDelay {
		p.bad("ha.leader_lock_delay", h.LeaderLockDelay, "is not in [0s, 1m] (Consul's lock-delay bound)")
	}
	if h.AliveTTL < ha.MinAliveTTL || h.AliveTTL > ha.MaxAliveTTL {
		p.bad("ha.alive_ttl", h.AliveTTL, fmt.Sprintf("is not in [%v, %v]", ha.MinAliveTTL, ha.MaxAliveTTL))
	}
	if pre := h.Consul.Prefix; pre == "" || pre[0] == '/' {
		p.bad("ha.consul.prefix", pre, "must be a non-empty KV path not starting with /")
	}
}

// HAConfig is the ha.Config of the ha section (the prefix with a trailing
// "/"); the replica id is left to ha.NewReplicaID.
func (c Config) HAConfig() ha.Config {
	prefix := c.HA.Consul.Prefix
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return ha.Config{Prefix: prefix, PublishInterval: c.HA.PublishInterval, LeaderLockDelay: c.HA.LeaderLockDelay, AliveTTL: c.HA.AliveTTL}
}
