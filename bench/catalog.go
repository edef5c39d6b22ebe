package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/discovery"
)

// endpointPort is the port of every synthetic endpoint; addresses differ.
const endpointPort = 8080

// Catalog is a synthetic fleet of backends: Services services of Endpoints
// endpoints each. Endpoint e of service s listens on 10.0.s.(e+1):8080 and
// carries a TTL check whose status the benchmarks flip.
type Catalog struct {
	Services  int // in [1, 256]
	Endpoints int // per service, in [1, 254]
}

// Validate reports a catalog too large for its address scheme.
func (c Catalog) Validate() error {
	var errs []error
	if c.Services < 1 || c.Services > 256 {
		errs = append(errs, fmt.Errorf("bench: catalog: %d services, want [1, 256]", c.Services))
	}
	if c.Endpoints < 1 || c.Endpoints > 254 {
		errs = append(errs, fmt.Errorf("bench: catalog: %d endpoints per service, want [1, 254]", c.Endpoints))
	}
	return errors.Join(errs...)
}

// Size is the number of endpoints over all services.
func (c Catalog) Size() int { return c.Services * c.Endpoints }

// Service is the name of service s (also its cluster and EDS resource name).
func (c Catalog) Service(s int) string { return fmt.Sprintf("bench-svc-%03d", s) }

// Key identifies endpoint e of service s as a node sees it in EDS.
func (c Catalog) Key(s, e int) Key {
	return Key{Service: c.Service(s), Addr: net.JoinHostPort(c.address(s, e), strconv.Itoa(endpointPort))}
}

func (c Catalog) address(s, e int) string { return fmt.Sprintf("10.0.%d.%d", s, e+1) }

func (c Catalog) id(s, e int) string { return fmt.Sprintf("%s-%03d", c.Service(s), e) }

// CheckID is the id of the TTL check of endpoint e of service s.
func (c Catalog) CheckID(s, e int) string { return c.id(s, e) + "-ttl" }

// Register registers every endpoint with the agent (through its HTTP API,
// workers at a time), each with a passing TTL check of one hour.
func (c Catalog) Register(ctx context.Context, agent *api.Agent, workers int) error {
	type job struct{ s, e int }
	jobs := make(chan job)
	errc := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range jobs {
				reg := &api.AgentServiceRegistration{
					ID: c.id(j.s, j.e), Name: c.Service(j.s), Address: c.address(j.s, j.e), Port: endpointPort,
					Meta: map[string]string{"zone": "zone-" + strconv.Itoa(j.e%3)},
					Check: &api.AgentServiceCheck{CheckID: c.CheckID(j.s, j.e), TTL: "1h",
						Status: api.HealthPassing},
				}
				if err := agent.ServiceRegisterOpts(reg, api.ServiceRegisterOpts{}.WithContext(ctx)); err != nil {
					errc <- fmt.Errorf("bench: register %s: %w", reg.ID, err)
					return
				}
			}
		})
	}
	var err error
feed:
	for s := range c.Services {
		for e := range c.Endpoints {
			select {
			case jobs <- job{s, e}:
			case err = <-errc:
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	close(errc)
	return errors.Join(err, <-errc)
}

// Healthy is the wait target of the registered catalog: every endpoint HEALTHY.
func (c Catalog) Healthy() []Want {
	out := make([]Want, 0, c.Size())
	for s := range c.Services {
		for e := range c.Endpoints {
			out = append(out, Want{Key: c.Key(s, e), Status: corev3.HealthStatus_HEALTHY})
		}
	}
	return out
}

// Snapshot is the discovery view of the catalog with the given health per
// key (HEALTHY for keys not in health), for in-process benchmarks.
func (c Catalog) Snapshot(health map[Key]discovery.Health) discovery.Snapshot {
	snap := discovery.Snapshot{Services: make([]discovery.Service, 0, c.Services)}
	for s := range c.Services {
		svc := discovery.Service{Name: c.Service(s), Endpoints: make([]discovery.Endpoint, 0, c.Endpoints)}
		for e := range c.Endpoints {
			h, ok := health[c.Key(s, e)]
			if !ok {
				h = discovery.HealthHealthy
			}
			zone := "zone-" + strconv.Itoa(e%3)
			svc.Endpoints = append(svc.Endpoints, discovery.Endpoint{
				ID: c.id(s, e), Address: c.address(s, e), Port: endpointPort, Health: h, Weight: 1,
				Locality: discovery.Locality{Region: "dc1", Zone: zone},
				Meta:     map[string]string{"zone": zone},
			})
		}
		snap.Services = append(snap.Services, svc)
	}
	return snap
}

// Flipper flips TTL checks between passing and critical and remembers the
// status it last set.
type Flipper struct {
	cat   Catalog
	agent *api.Agent
	flipped
}

// NewFlipper starts from the registered state: every check passing.
func NewFlipper(cat Catalog, agent *api.Agent) *Flipper {
	return &Flipper{cat: cat, agent: agent}
}

// flipped is what a flipper last set: the checks it turned critical
// (every check passes until flipped). Safe for concurrent use.
type flipped struct {
	mu   sync.Mutex
	down map[[2]int]bool
}

// isDown reports whether the check of endpoint e of service s was last
// set critical.
func (f *flipped) isDown(s, e int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down[[2]int{s, e}]
}

// set records the status last set for the check of endpoint e of service s.
func (f *flipped) set(s, e int, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down == nil {
		f.down = map[[2]int]bool{}
	}
	f.down[[2]int{s, e}] = down
}

// Next is what flipping endpoint e of service s would produce.
func (f *Flipper) Next(s, e int) Want {
	w := f.Current(s, e)
	if w.Status == corev3.HealthStatus_HEALTHY {
		w.Status = corev3.HealthStatus_UNHEALTHY
	} else {
		w.Status = corev3.HealthStatus_HEALTHY
	}
	return w
}

// Current is the health endpoint e of service s has now.
func (f *Flipper) Current(s, e int) Want {
	if f.isDown(s, e) {
		return Want{Key: f.cat.Key(s, e), Status: corev3.HealthStatus_UNHEALTHY}
	}
	return Want{Key: f.cat.Key(s, e), Status: corev3.HealthStatus_HEALTHY}
}

// Flip sets the check of endpoint e of service s to the status Next returned.
func (f *Flipper) Flip(ctx context.Context, s, e int) error {
	want := f.Next(s, e)
	status := api.HealthPassing
	if want.Status == corev3.HealthStatus_UNHEALTHY {
		status = api.HealthCritical
	}
	q := (&api.QueryOptions{}).WithContext(ctx)
	if err := f.agent.UpdateTTLOpts(f.cat.CheckID(s, e), "bench flip", status, q); err != nil {
		return fmt.Errorf("bench: flip %s to %s: %w", f.cat.CheckID(s, e), status, err)
	}
	f.set(s, e, status == api.HealthCritical)
	return nil
}
