package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/hashicorp/consul/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/xds"

	"github.com/xds-server/xds-server/e2e/harness"
)

// callFunc makes one RPC and returns the id of the backend that served it.
type callFunc func(ctx context.Context) (string, error)

// TestClientsFollowConsulHealth registers three real gRPC backends in a
// real Consul, serves them through the real xds-server binary, and checks
// with grpc-go's xDS resolver (SotW) and with a delta ADS client that RPCs
// reach all three, stop reaching a backend within 2 s of its check turning
// critical, and reach it again when it recovers.
func TestClientsFollowConsulHealth(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	consul := harness.Consul(t)
	backends := startEcho(t, 3)
	registerEcho(t, consul, backends, "")
	srv := startServer(t, consul)
	setCheck := func(t *testing.T, id, status string) {
		t.Helper()
		if err := consul.Client().Agent().UpdateTTL("ttl-"+id, "e2e", status); err != nil {
			t.Fatal(err)
		}
	}
	for name, dial := range map[string]func(t *testing.T, xdsAddr string) callFunc{
		"sotw grpc-go xds resolver": dialGRPCXDS,
		"delta ads client":          dialDelta,
	} {
		t.Run(name, func(t *testing.T) {
			call := dial(t, srv.XDSAddr)
			all := []string{backends[0].ID, backends[1].ID, backends[2].ID}
			victim := backends[1].ID
			awaitAll(t, call, all, 30*time.Second)
			checkDebugPages(t, srv, victim)

			setCheck(t, victim, api.HealthCritical)
			critical := time.Now()
			lastHit := callFor(t, call, victim, 3*time.Second)
			if lag := lastHit.Sub(critical); lag > 2*time.Second {
				t.Errorf("RPCs reached %s %v after its check turned critical; want < 2s", victim, lag)
			} else {
				t.Logf("%s stopped getting RPCs %v after its check turned critical", victim, max(lag, 0))
			}

			setCheck(t, victim, api.HealthPassing)
			awaitAll(t, call, all, 10*time.Second)
		})
	}
}

func startEcho(t *testing.T, n int) []*harness.Backend {
	var backends []*harness.Backend
	for i := range n {
		backends = append(backends, harness.StartBackend(t, fmt.Sprintf("echo-%d", i+1)))
	}
	return backends
}

// registerEcho registers the backends as service "echo" with TTL checks,
// passing except for the one called critical.
func registerEcho(t *testing.T, consul *harness.ConsulAgent, backends []*harness.Backend, critical string) {
	t.Helper()
	for i, b := range backends {
		status := api.HealthPassing
		if b.ID == critical {
			status = api.HealthCritical
		}
		err := consul.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{
			ID: b.ID, Name: "echo", Address: b.Host, Port: b.Port,
			Meta:  map[string]string{"zone": "zone-" + strconv.Itoa(i%2)},
			Check: &api.AgentServiceCheck{CheckID: "ttl-" + b.ID, TTL: "10m", Status: status},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func startServer(t *testing.T, consul *harness.ConsulAgent, extra ...string) *harness.Server {
	t.Helper()
	return startServerWith(t, consul, harness.ServerOptions{}, extra...)
}

// startServerWith is startServer with the harness's options.
func startServerWith(t *testing.T, consul *harness.ConsulAgent, opts harness.ServerOptions, extra ...string) *harness.Server {
	t.Helper()
	args := append([]string{
		"--discovery.source", "consul", "--discovery.consul.address", consul.Addr(),
		"--discovery.consul.min_interval", "10ms", "--discovery.consul.backoff_base", "50ms",
		"--discovery.consul.backoff_max", "500ms", "--xds.debounce", "10ms", "--log.level", "debug"}, extra...)
	srv := harness.StartServerWith(t, opts, args...)
	srv.WaitReady(t)
	return srv
}

// checkDebugPages reads /debug/nodes and /debug/config for the connected node.
func checkDebugPages(t *testing.T, srv *harness.Server, endpointID string) {
	t.Helper()
	var nodes struct {
		Nodes []struct {
			ID      string `json:"id"`
			Streams int    `json:"streams"`
		} `json:"nodes"`
	}
	getJSON(t, "http://"+srv.AdminAddr+"/debug/nodes", &nodes)
	var id string
	for _, n := range nodes.Nodes {
		if n.Streams > 0 {
			id = n.ID
		}
	}
	if id == "" {
		t.Fatalf("/debug/nodes shows no connected node: %+v", nodes)
	}
	var cfg struct {
		Resources map[string]struct {
			Version   string            `json:"version"`
			Resources []json.RawMessage `json:"resources"`
		} `json:"resources"`
	}
	getJSON(t, "http://"+srv.AdminAddr+"/debug/config?node="+url.QueryEscape(id), &cfg)
	eds := cfg.Resources["endpoint"]
	if eds.Version == "" || len(eds.Resources) != 1 || !strings.Contains(string(eds.Resources[0]), endpointID) {
		t.Errorf("/debug/config?node=%s: endpoint config %+v lacks %s", id, eds, endpointID)
	}
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// awaitAll makes RPCs until every backend in want has served one.
func awaitAll(t *testing.T, call callFunc, want []string, limit time.Duration) {
	t.Helper()
	seen := map[string]int{}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		id, err := call(ctx)
		cancel()
		if err == nil {
			seen[id]++
		}
		if len(seen) == len(want) {
			return
		}
	}
	t.Fatalf("within %v RPCs reached only %v, want all of %v", limit, seen, want)
}

// callFor makes RPCs for d and returns the time of the last one that
// reached victim (the zero time if none did). It fails if RPCs fail or if
// the last second saw no successful RPC.
func callFor(t *testing.T, call callFunc, victim string, d time.Duration) time.Time {
	t.Helper()
	var lastHit time.Time
	start := time.Now()
	okTail, failures := 0, 0
	var firstErr error
	for time.Since(start) < d {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		id, err := call(ctx)
		cancel()
		switch {
		case err != nil:
			failures++
			if firstErr == nil {
				firstErr = fmt.Errorf("%v after the change: %w", time.Since(start).Round(time.Millisecond), err)
			}
		case id == victim:
			lastHit = time.Now()
		case time.Since(start) > d-time.Second:
			okTail++
		}
	}
	if failures > 0 {
		t.Errorf("%d RPCs failed while a backend was unhealthy (the others were healthy); the first: %v", failures, firstErr)
	}
	if okTail == 0 {
		t.Errorf("no successful RPC in the last second")
	}
	if lastHit.IsZero() {
		return start
	}
	return lastHit
}

func unaryCall(conn *grpc.ClientConn) callFunc {
	c := testgrpc.NewTestServiceClient(conn)
	return func(ctx context.Context) (string, error) {
		resp, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		return resp.GetServerId(), err
	}
}

// dialGRPCXDS dials xds:///echo with grpc-go's own xDS resolver and a
// bootstrap of its own (so each client is its own node).
func dialGRPCXDS(t *testing.T, xdsAddr string) callFunc {
	return dialGRPCXDSAs(t, xdsAddr, "grpc-"+t.Name())
}

// dialGRPCXDSAs is dialGRPCXDS with the node id given.
func dialGRPCXDSAs(t *testing.T, xdsAddr, nodeID string) callFunc {
	return unaryCall(dialXDS(t, xdsAddr, nodeID))
}

// dialXDS returns a channel to xds:///echo through grpc-go's xDS resolver,
// as node nodeID (cluster e2e, zone zone-0), with a bootstrap of its own.
func dialXDS(t *testing.T, xdsAddr, nodeID string) *grpc.ClientConn {
	bootstrap := fmt.Sprintf(`{
		"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": %q, "cluster": "e2e", "locality": {"zone": "zone-0"}}
	}`, xdsAddr, nodeID)
	rb, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///echo", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(rb))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// dialDelta subscribes to EDS over a delta ADS stream and feeds the
// serving endpoints of "echo" (HEALTHY or UNKNOWN, as grpc-go would use)
// to a round-robin channel through a manual resolver.
func dialDelta(t *testing.T, xdsAddr string) callFunc {
	xconn, err := grpc.NewClient(xdsAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { xconn.Close() })
	ads, err := harness.StartADS(context.Background(), harness.ADSConfig{
		Conn: xconn, NodeID: "delta-" + t.Name(), Cluster: "e2e", Delta: true,
		Types: []string{resource.ClusterType, resource.EndpointType},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ads.Close() })
	r := manual.NewBuilderWithScheme("e2edelta")
	r.InitialState(resolver.State{})
	go func() {
		for u := range ads.Updates() {
			a, ok := u.Resources["echo"]
			if u.TypeURL != resource.EndpointType || !ok {
				continue
			}
			var cla endpointv3.ClusterLoadAssignment
			if err := a.UnmarshalTo(&cla); err != nil {
				continue
			}
			r.UpdateState(resolver.State{Addresses: servingAddrs(&cla)})
		}
	}()
	conn, err := grpc.NewClient("e2edelta:///echo", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithResolvers(r), grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"round_robin": {}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return unaryCall(conn)
}

func servingAddrs(cla *endpointv3.ClusterLoadAssignment) []resolver.Address {
	var out []resolver.Address
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			if h := e.GetHealthStatus(); h != corev3.HealthStatus_HEALTHY && h != corev3.HealthStatus_UNKNOWN {
				continue
			}
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, resolver.Address{Addr: fmt.Sprintf("%s:%d", sa.GetAddress(), sa.GetPortValue())})
		}
	}
	return out
}
