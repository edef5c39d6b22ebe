package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xds-server/xds-server/e2e/harness"
)

// claSeen is one assignment a node accepted: its bytes, version and
// weights by address.
type claSeen struct {
	raw     []byte
	version string
	weights map[string]uint32
	at      time.Time
}

// claObserver is a raw SotW ADS client (a node of one replica) that keeps
// every assignment of one cluster it got; notify gets a token at each.
type claObserver struct {
	name    string
	mu      sync.Mutex
	history []claSeen
	notify  chan struct{}
}

// startCLAObserver connects node to srv and records cluster's assignments.
func startCLAObserver(t *testing.T, srv *harness.Server, name, node, cluster string, notify chan struct{}) *claObserver {
	t.Helper()
	o := &claObserver{name: name, notify: notify}
	observeADS(t, srv, harness.ADSConfig{NodeID: node, Cluster: "e2e",
		Types: []string{resource.ClusterType, resource.EndpointType}}, func(u harness.ADSUpdate) { o.record(u, cluster) })
	return o
}

// observeADS opens a raw ADS stream to srv as cfg says (its Conn is
// made here) and hands every update the node accepts to record, on a
// goroutine of its own, until the test ends.
func observeADS(t *testing.T, srv *harness.Server, cfg harness.ADSConfig, record func(harness.ADSUpdate)) {
	t.Helper()
	conn, err := grpc.NewClient(srv.XDSAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	cfg.Conn = conn
	ads, err := harness.StartADS(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case u := <-ads.Updates():
				record(u)
			case <-quit:
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = ads.Close()
		close(quit)
		<-done
	})
}

func (o *claObserver) record(u harness.ADSUpdate, cluster string) {
	a, ok := u.Resources[cluster]
	if u.TypeURL != resource.EndpointType || !ok {
		return
	}
	var cla endpointv3.ClusterLoadAssignment
	if err := a.UnmarshalTo(&cla); err != nil {
		return
	}
	o.mu.Lock()
	o.history = append(o.history, claSeen{raw: a.GetValue(), version: u.Version, weights: claWeights(&cla), at: u.At})
	o.mu.Unlock()
	select {
	case o.notify <- struct{}{}:
	default:
	}
}

// last is the latest assignment and how many were seen.
func (o *claObserver) last() (claSeen, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.history) == 0 {
		return claSeen{}, 0
	}
	return o.history[len(o.history)-1], len(o.history)
}

// since is every assignment from the mark-th on.
func (o *claObserver) since(mark int) []claSeen {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]claSeen(nil), o.history[min(mark, len(o.history)):]...)
}

// claWeights is the load balancing weight of every endpoint, by address.
func claWeights(cla *endpointv3.ClusterLoadAssignment) map[string]uint32 {
	out := map[string]uint32{}
	for _, l := range cla.GetEndpoints() {
		for _, ep := range l.GetLbEndpoints() {
			sa := ep.GetEndpoint().GetAddress().GetSocketAddress()
			out[sa.GetAddress()+":"+strconv.Itoa(int(sa.GetPortValue()))] = ep.GetLoadBalancingWeight().GetValue()
		}
	}
	return out
}

// awaitSameCLA waits, on the observers' updates, until every observer's
// latest assignment has want's shares and all are byte-identical with
// the same version; it returns how long that took.
func awaitSameCLA(t *testing.T, obs []*claObserver, notify chan struct{}, want map[string]float64, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	timeout := time.After(within)
	for {
		problem := sameCLAProblem(obs, want)
		if problem == "" {
			return time.Since(start)
		}
		select {
		case <-notify:
		case <-timeout:
			t.Fatalf("after %v: %s", within, problem)
		}
	}
}

// sameCLAProblem says why the observers do not all serve want's shares
// (within 1 point) in identical assignments ("" when they do).
func sameCLAProblem(obs []*claObserver, want map[string]float64) string {
	return sameCLAProblemTol(obs, want, 0.01)
}

// sameCLAProblemTol is sameCLAProblem with a share tolerance.
func sameCLAProblemTol(obs []*claObserver, want map[string]float64, tol float64) string {
	first, _ := obs[0].last()
	for _, o := range obs {
		l, n := o.last()
		switch {
		case n == 0:
			return o.name + " got no assignment"
		case len(l.weights) == 0 || !sharesNear(l.weights, want, tol):
			return fmt.Sprintf("%s serves weights %v, want shares %v", o.name, l.weights, want)
		case !bytes.Equal(l.raw, first.raw) || l.version != first.version:
			return fmt.Sprintf("%s serves version %q, %s %q: not byte-identical", o.name, l.version, obs[0].name, first.version)
		}
	}
	return ""
}

// postLoad posts one report per endpoint to srv's /v1/load, at 100 qps.
func postLoad(t *testing.T, srv *harness.Server, service string, util map[string]float64) {
	t.Helper()
	qps := map[string]float64{}
	for id := range util {
		qps[id] = 100
	}
	postLoadQPS(t, srv, service, util, qps)
}

// postLoadQPS posts one report per endpoint to srv's /v1/load.
func postLoadQPS(t *testing.T, srv *harness.Server, service string, util, qps map[string]float64) {
	t.Helper()
	var reports []string
	for id, u := range util {
		reports = append(reports, fmt.Sprintf(`{"service":%q,"endpoint":%q,"utilization":%g,"qps":%g}`, service, id, u, qps[id]))
	}
	resp, err := http.Post(srv.AdminURL("/v1/load"), "application/json", strings.NewReader("["+strings.Join(reports, ",")+"]"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/load to %s: %s", srv.AdminAddr, resp.Status)
	}
}
