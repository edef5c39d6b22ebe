package ha

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/discovery"
)

// AliveCheckPrefix starts the id of every replica's alive check; Consul
// discovery ignores node checks of this prefix (a dead replica's critical
// check would make every service on its node UNHEALTHY).
const AliveCheckPrefix = discovery.ReplicaCheckPrefix

// DefaultAliveTTL is the alive check's TTL when AliveConfig.TTL is 0
// (ha.alive_ttl's default).
const DefaultAliveTTL = 3 * time.Second

// MinAliveTTL and MaxAliveTTL bound ha.alive_ttl (Config.AliveTTL): below,
// a replica paused for under a second would lose the lead; above, the
// leader session's own TTL (10s, Consul invalidates within 2x) loses a
// dead leader first.
const (
	MinAliveTTL = time.Second
	MaxAliveTTL = 20 * time.Second
)

// AliveConfig configures Alive.
type AliveConfig struct {
	Client  *api.Client // required: the local Consul agent
	Replica string      // required: this replica's id
	// TTL is the check's TTL; 0 means DefaultAliveTTL. A replica killed
	// with -9 has its check critical within TTL, which invalidates its
	// leader session at once (WeightsConfig.SessionChecks).
	TTL time.Duration
	// CountError, optional, counts failures by op ("alive").
	CountError func(op string)
	Logger     *slog.Logger // nil: slog.Default()
}

// Alive is a node-level TTL check on the local Consul agent, id
// AliveCheckPrefix+replica, kept passing every TTL/3 while the replica
// runs and deregistered when it stops. Its id goes into the leader
// session's checks, so a replica killed without a goodbye loses the
// weights lead within TTL (then the lock delay), not the session TTL
// (10s, up to 2x). The updates are agent-local: the output never
// changes, so they cause no catalog (Raft) write.
type Alive struct {
	cfg AliveConfig
	log *slog.Logger
}

// NewAlive checks cfg.
func NewAlive(cfg AliveConfig) (*Alive, error) {
	if cfg.Client == nil || cfg.Replica == "" {
		return nil, errors.New("ha: alive: client and replica are required")
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultAliveTTL
	}
	if cfg.TTL < 300*time.Millisecond {
		return nil, fmt.Errorf("ha: alive: ttl %v: want at least 300ms", cfg.TTL)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Alive{cfg: cfg, log: cfg.Logger}, nil
}

// CheckID is the check's id, for WeightsConfig.SessionChecks.
func (a *Alive) CheckID() string { return AliveCheckPrefix + a.cfg.Replica }

// Register removes the critical alive checks of replicas killed without a
// goodbye (a live replica whose check went critical registers it again)
// and registers this replica's check passing, so a session can name it.
func (a *Alive) Register() error {
	ag := a.cfg.Client.Agent()
	checks, err := ag.Checks()
	if err != nil {
		return fmt.Errorf("ha: alive: list checks: %w", err)
	}
	for id, c := range checks {
		if strings.HasPrefix(id, AliveCheckPrefix) && id != a.CheckID() && c.Status == api.HealthCritical {
			if err := ag.CheckDeregister(id); err != nil {
				a.log.Warn("stale alive check not removed", "check", id, "error", err)
			}
		}
	}
	return a.registerCtx(context.Background())
}

func (a *Alive) registerCtx(ctx context.Context) error {
	err := a.cfg.Client.Agent().CheckRegisterOpts(&api.AgentCheckRegistration{
		ID: a.CheckID(), Name: "xds-server replica " + a.cfg.Replica + " alive",
		Notes:             "kept passing by the xds-server replica; its weights leader session depends on it",
		AgentServiceCheck: api.AgentServiceCheck{TTL: a.cfg.TTL.String(), Status: api.HealthPassing},
	}, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("ha: alive: register %s: %w", a.CheckID(), err)
	}
	return nil
}

// Run keeps the check passing every TTL/3 until ctx is done, then
// deregisters it. When the agent lost the check (a restarted -dev agent)
// or it went critical, it is registered again. Each update gets TTL/3: an
// agent that does not answer one is asked again at the next tick, not
// waited for past the TTL.
func (a *Alive) Run(ctx context.Context) {
	defer a.deregister()
	every := a.cfg.TTL / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		uctx, cancel := context.WithTimeout(ctx, every)
		err := a.cfg.Client.Agent().UpdateTTLOpts(a.CheckID(), "alive", api.HealthPassing, (&api.QueryOptions{}).WithContext(uctx))
		if err != nil && uctx.Err() == nil { // failed in time (the agent lost the check, or is down): register it again
			err = a.registerCtx(uctx)
		}
		cancel()
		if err != nil && ctx.Err() == nil {
			if a.cfg.CountError != nil {
				a.cfg.CountError("alive")
			}
			a.log.Debug("alive check not updated", "check", a.CheckID(), "error", err)
		}
	}
}

func (a *Alive) deregister() {
	if err := a.cfg.Client.Agent().CheckDeregister(a.CheckID()); err != nil {
		a.log.Warn("alive check not deregistered", "check", a.CheckID(), "error", err)
	}
}
