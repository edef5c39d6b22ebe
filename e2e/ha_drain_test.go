package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xds-server/xds-server/e2e/harness"
)

// haArgs are the flags of the HA replicas: drains shared in Consul KV.
func haArgs(prefix string) []string {
	return []string{"--drain.window", ldDrainWindow.String(), "--ha.enabled", "--ha.consul.prefix", prefix,
		"--subsetting.index_source", "consul", "--subsetting.consul.prefix", prefix + "subsetting",
		"--xds.shutdown_grace", "0s"}
}

// TestHADrainAcrossReplicas is issue 15's drain test: three real
// xds-server replicas share one real Consul (ha.enabled), the grpc-go xDS
// clients and a raw ADS observer are connected to replica B, another raw
// ADS observer to replica C. A drain through replica A's admin API makes
// B's nodes stop sending new RPCs to the backend within 1 s (zero failed
// RPCs, in-flight ones finish) and C's node get it DRAINING; every
// replica lists the drain; an undrain through replica C restores it. Then
// a drain survives the restart of all three replicas.
func TestHADrainAcrossReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	consul := harness.Consul(t)
	args := haArgs("e2e-ha/")
	srvs := []*harness.Server{startServer(t, consul, args...), startServer(t, consul, args...), startServer(t, consul, args...)}
	a, b, c := srvs[0], srvs[1], srvs[2]
	e := &lameDuckEnv{consul: consul, srv: b}
	for i := range 3 {
		e.backends = append(e.backends, e.startBackend(t, fmt.Sprintf("%s-%d", ldService, i+1)))
	}
	e.obs = startEDSObserver(t, b.XDSAddr, "ha-observer")
	var ids []string
	for _, be := range e.backends {
		ids = append(ids, be.ID)
	}
	for i := range ldClients {
		node := fmt.Sprintf("ha-grpc-%d", i+1)
		conn := dialXDS(t, b.XDSAddr, node)
		awaitAll(t, unaryCall(conn), ids, 30*time.Second)
		e.nodes, e.conns = append(e.nodes, node), append(e.conns, conn)
	}

	victim := e.backends[1]
	target := fmt.Sprintf(`{"service": %q, "endpoint": %q}`, ldService, victim.ID)
	onC := startEDSObserver(t, c.XDSAddr, "ha-observer-on-c") // a node of replica C
	stats := &drainStats{}
	defer stats.log(t)
	p, last := e.drainCycle(t, victim,
		func(t *testing.T) {
			drainAt := time.Now()
			haDrainCall(t, a, http.MethodPost, target, http.StatusOK)
			// C's node, awaited on its own updates (events, not polls).
			took := awaitObserved(t, onC, drainAt, victim.GRPCAddr, corev3.HealthStatus_DRAINING)
			t.Logf("C's node got %s DRAINING %v after the drain call through A", victim.ID, took)
			if took > ldNewRPCLimit {
				t.Errorf("C's node got the drain %v after the call, want within %v", took, ldNewRPCLimit)
			}
		},
		func(t *testing.T) {
			for i, s := range srvs {
				if got := haListed(t, s); got != victim.ID {
					t.Errorf("replica %c lists drains %q, want %q", 'A'+i, got, victim.ID)
				}
			}
			haDrainCall(t, c, http.MethodDelete, target, http.StatusOK)
		})
	stats.add(p, last)
	if p > ldNewRPCLimit {
		t.Errorf("drain through A reached B's nodes in %v, want within %v", p, ldNewRPCLimit)
	}

	// A drain survives the restart of every replica.
	haDrainCall(t, a, http.MethodPost, target, http.StatusOK)
	for _, s := range srvs {
		if err := s.Stop(); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
	for i := range srvs {
		srvs[i] = startServer(t, consul, args...)
		if got := haListed(t, srvs[i]); got != victim.ID {
			t.Errorf("restarted replica %c lists drains %q, want %q", 'A'+i, got, victim.ID)
		}
	}
	a, b, c = srvs[0], srvs[1], srvs[2]
	e.srv, e.nodes = b, nil
	e.obs = startEDSObserver(t, b.XDSAddr, "ha-observer-2")
	e.awaitEDS(t, time.Now(), victim.ID+" DRAINING after the restart", endpointIs(victim.GRPCAddr, corev3.HealthStatus_DRAINING))
	var page struct {
		Replica string `json:"replica"`
		Drains  struct {
			Drains []struct {
				Endpoint string `json:"endpoint"`
			} `json:"drains"`
		} `json:"drains"`
	}
	getJSON(t, a.AdminURL("/debug/ha"), &page)
	if page.Replica == "" || len(page.Drains.Drains) != 1 || page.Drains.Drains[0].Endpoint != victim.ID {
		t.Errorf("/debug/ha of A = %+v, want its replica id and the drain", page)
	}

	// Consul down: a drain call answers 503 and changes nothing; the drain
	// in force stays. Consul back: drain calls work again.
	consul.Stop()
	haDrainCall(t, a, http.MethodDelete, target, http.StatusServiceUnavailable)
	if got := haListed(t, b); got != victim.ID {
		t.Errorf("during the outage B lists %q, want %q", got, victim.ID)
	}
	if cla, _, _ := e.obs.latest(); endpointHealth(cla)[victim.GRPCAddr] != corev3.HealthStatus_DRAINING {
		t.Errorf("during the outage B serves %v, want %s still DRAINING", endpointHealth(cla), victim.ID)
	}
	consul.Start()
	haAwaitDrainCall(t, c, http.MethodDelete, target)
	e.awaitEDS(t, time.Now(), victim.ID+" serving after Consul came back", endpointIs(victim.GRPCAddr, corev3.HealthStatus_HEALTHY))
}

// haAwaitDrainCall retries a drain call until it answers 200 (Consul is
// coming back; its readiness as seen by xds-server is not observable).
func haAwaitDrainCall(t *testing.T, srv *harness.Server, method, body string) {
	t.Helper()
	e := &lameDuckEnv{srv: srv}
	deadline := time.Now().Add(ldWait)
	for {
		code, resp := e.drainAPI(t, method, "", body)
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s /v1/drain on %s = %d %s within %v, want 200", method, srv.AdminAddr, code, resp, ldWait)
		}
		time.Sleep(100 * time.Millisecond) // polling an external process
	}
}

// haDrainCall calls srv's drain API and checks the status.
func haDrainCall(t *testing.T, srv *harness.Server, method, body string, want int) {
	t.Helper()
	e := &lameDuckEnv{srv: srv}
	if code, resp := e.drainAPI(t, method, "", body); code != want {
		t.Fatalf("%s /v1/drain on %s = %d %s, want %d", method, srv.AdminAddr, code, resp, want)
	}
}

// haListed returns the endpoints of the admin drains srv lists, joined.
func haListed(t *testing.T, srv *harness.Server) string {
	t.Helper()
	st := (&lameDuckEnv{srv: srv}).drainState(t)
	var eps []string
	for _, d := range st.Drains {
		eps = append(eps, d.Endpoint)
	}
	return strings.Join(eps, ",")
}

// awaitObserved waits until o's node has addr with health h and returns
// how long after since the update that brought it arrived.
func awaitObserved(t *testing.T, o *edsObserver, since time.Time, addr string, h corev3.HealthStatus) time.Duration {
	t.Helper()
	deadline := time.NewTimer(ldWait)
	defer deadline.Stop()
	for {
		cla, at, changed := o.latest()
		if cla != nil && endpointHealth(cla)[addr] == h {
			return max(at.Sub(since), 0)
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s: %s not %v within %v (has %v)", o.node, addr, h, ldWait, endpointHealth(cla))
		}
	}
}
