package e2e

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/hashicorp/consul/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xds-server/xds-server/e2e/harness"
)

// fleetObserver is a raw ADS node that keeps the health of every endpoint
// of every service it was sent, and whether any was ever DRAINING.
type fleetObserver struct {
	mu       sync.Mutex
	eps      map[string]map[string]corev3.HealthStatus // service -> address -> health
	drained  map[string]time.Time                      // "service address" -> first update with it DRAINING
	changed  chan struct{}                             // closed and replaced at every update
	updateAt time.Time
}

func startFleetObserver(t *testing.T, xdsAddr string) *fleetObserver {
	t.Helper()
	conn, err := grpc.NewClient(xdsAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ads, err := harness.StartADS(context.Background(), harness.ADSConfig{Conn: conn, NodeID: "guard-observer", Cluster: "e2e",
		Types: []string{resource.ClusterType, resource.EndpointType}})
	if err != nil {
		t.Fatal(err)
	}
	o := &fleetObserver{eps: map[string]map[string]corev3.HealthStatus{}, drained: map[string]time.Time{}, changed: make(chan struct{})}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case u := <-ads.Updates():
				if u.TypeURL == resource.EndpointType {
					o.record(u)
				}
			case <-quit:
				return
			}
		}
	}()
	t.Cleanup(func() { _ = ads.Close(); close(quit); <-done })
	return o
}

func (o *fleetObserver) record(u harness.ADSUpdate) {
	eps := map[string]map[string]corev3.HealthStatus{}
	var drained []string
	for name, a := range u.Resources {
		var cla endpointv3.ClusterLoadAssignment
		if a.UnmarshalTo(&cla) != nil {
			continue
		}
		eps[name] = endpointHealth(&cla)
		for addr, h := range eps[name] {
			if h == corev3.HealthStatus_DRAINING {
				drained = append(drained, name+" "+addr)
			}
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.eps, o.updateAt = eps, u.At
	for _, d := range drained {
		if _, ok := o.drained[d]; !ok {
			o.drained[d] = u.At
		}
	}
	close(o.changed)
	o.changed = make(chan struct{})
}

// await waits until pred holds for the endpoints, and returns when the
// update that satisfied it arrived.
func (o *fleetObserver) await(t *testing.T, what string, limit time.Duration, pred func(map[string]map[string]corev3.HealthStatus) bool) time.Time {
	t.Helper()
	deadline := time.After(limit)
	for {
		o.mu.Lock()
		ok, at, changed := pred(o.eps), o.updateAt, o.changed
		o.mu.Unlock()
		if ok {
			return at
		}
		select {
		case <-changed:
		case <-deadline:
			o.mu.Lock()
			defer o.mu.Unlock()
			t.Fatalf("%s: not within %v; endpoints %v", what, limit, o.eps)
		}
	}
}

// everDrained returns the endpoints seen DRAINING so far ("service
// address"), each with the time of the first update that had it so.
func (o *fleetObserver) everDrained() map[string]time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.drained)
}

// healthyCount is a predicate: n endpoints in all, every one HEALTHY.
func healthyCount(n int) func(map[string]map[string]corev3.HealthStatus) bool {
	return func(eps map[string]map[string]corev3.HealthStatus) bool {
		c := 0
		for _, svc := range eps {
			for _, h := range svc {
				if h != corev3.HealthStatus_HEALTHY {
					return false
				}
				c++
			}
		}
		return c == n
	}
}

// TestStaticFileTruncatedNoDrain is the regression of issue 14 item 7 as
// it was found: the static file of a running server truncated to 0 bytes
// used to put every endpoint in DRAINING within a second. Now the reload
// is rejected and counted, and every endpoint stays HEALTHY.
func TestStaticFileTruncatedNoDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	dir := t.TempDir()
	endpoints := filepath.Join(dir, "endpoints.yaml")
	write(t, endpoints, `services:
  - name: api
    endpoints:
      - { id: api-1, address: 127.0.0.1, port: 9001 }
      - { id: api-2, address: 127.0.0.1, port: 9002 }
  - name: web
    endpoints:
      - { id: web-1, address: 127.0.0.1, port: 9101 }
`)
	srv := harness.StartServer(t, "--discovery.static.file", endpoints, "--discovery.static.poll_interval", "50ms",
		"--xds.debounce", "10ms")
	srv.WaitReady(t)
	obs := startFleetObserver(t, srv.XDSAddr)
	obs.await(t, "3 HEALTHY endpoints", 20*time.Second, healthyCount(3))

	if err := os.Truncate(endpoints, 0); err != nil {
		t.Fatal(err)
	}
	awaitMetric(t, srv, `xds_discovery_static_reloads_total{result="error"} 1`)
	// A later good edit is applied: everything the server did about the
	// truncated file is behind it.
	write(t, endpoints, `services:
  - name: api
    endpoints:
      - { id: api-1, address: 127.0.0.1, port: 9001 }
      - { id: api-2, address: 127.0.0.1, port: 9002 }
  - name: web
    endpoints:
      - { id: web-1, address: 127.0.0.1, port: 9101 }
      - { id: web-2, address: 127.0.0.1, port: 9102 }
`)
	obs.await(t, "4 HEALTHY endpoints after the next good edit", 20*time.Second, healthyCount(4))
	if d := obs.everDrained(); len(d) != 0 {
		t.Fatalf("endpoints went DRAINING after the file was truncated: %v", d)
	}
	if !strings.Contains(srv.Logs(), "no services key") {
		t.Errorf("the rejected reload is not logged with its reason")
	}
}

// TestConsulEmptiedCatalogNoDrain: a real Consul agent restarted with an
// empty catalog is held for discovery.mass_removal_hold (endpoints stay
// HEALTHY, xds_discovery_held 1, no deregistration window starts), then
// applied (DRAINING for drain.window); a lone service that leaves before
// is applied at once.
func TestConsulEmptiedCatalogNoDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	const hold = 4 * time.Second
	consul := harness.Consul(t)
	agent := consul.Client().Agent()
	ids := map[string]string{"api-1": "api", "api-2": "api", "web-1": "web", "web-2": "web", "db-1": "db"}
	port := 9200
	for id, name := range ids {
		port++
		if err := agent.ServiceRegister(&api.AgentServiceRegistration{ID: id, Name: name, Port: port}); err != nil {
			t.Fatal(err)
		}
	}
	srv := startServer(t, consul, "--discovery.mass_removal_hold", hold.String(), "--drain.window", "30s")
	obs := startFleetObserver(t, srv.XDSAddr)
	obs.await(t, "5 HEALTHY endpoints", 20*time.Second, healthyCount(5))

	// A lone service leaves (1 of 5): DRAINING at once, for drain.window.
	start := time.Now()
	if err := agent.ServiceDeregister("db-1"); err != nil {
		t.Fatal(err)
	}
	at := obs.await(t, "db-1 DRAINING", 20*time.Second, func(eps map[string]map[string]corev3.HealthStatus) bool {
		return allDraining(eps["db"], 1)
	})
	if d := at.Sub(start); d >= hold {
		t.Fatalf("a lone service leaving reached EDS after %v, want it at once (before the hold, %v)", d, hold)
	}
	awaitMetric(t, srv, `xds_discovery_held 0`)

	// The agent restarts with an empty catalog (its services were
	// registered through the API, which a dev agent forgets): one update
	// that removes everything, held.
	consul.Stop()
	start = time.Now()
	consul.Start()
	awaitMetric(t, srv, `xds_discovery_held 1`)
	if d := drainedOutside(obs.everDrained(), "db "); len(d) != 0 {
		t.Fatalf("endpoints DRAINING while the removal is held: %v", d)
	}
	at = obs.await(t, "the emptied catalog applied: api and web DRAINING", hold+20*time.Second,
		func(eps map[string]map[string]corev3.HealthStatus) bool {
			return allDraining(eps["api"], 2) && allDraining(eps["web"], 2)
		})
	if d := at.Sub(start); d < hold {
		t.Fatalf("the empty catalog reached EDS %v after the restart, before the hold (%v) ended", d, hold)
	}
	for d, first := range drainedOutside(obs.everDrained(), "db ") {
		if first.Sub(start) < hold {
			t.Errorf("%s DRAINING %v after the restart, before the hold (%v) ended", d, first.Sub(start), hold)
		}
	}
	awaitMetric(t, srv, `xds_discovery_held 0`)
	awaitMetric(t, srv, `xds_discovery_holds_total 1`)
	t.Logf("lone service: applied at once; empty catalog of the restarted agent: applied %v after the restart (hold %v)", at.Sub(start).Round(time.Millisecond), hold)
}

func allDraining(eps map[string]corev3.HealthStatus, n int) bool {
	if len(eps) != n {
		return false
	}
	for _, h := range eps {
		if h != corev3.HealthStatus_DRAINING {
			return false
		}
	}
	return true
}

// drainedOutside drops the entries that start with prefix.
func drainedOutside(drained map[string]time.Time, prefix string) map[string]time.Time {
	maps.DeleteFunc(drained, func(d string, _ time.Time) bool { return strings.HasPrefix(d, prefix) })
	return drained
}
