package xds_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/e2e/harness"
	"github.com/xds-server/xds-server/xds"
)

var allTypes = []string{resource.ListenerType, resource.RouteType, resource.ClusterType, resource.EndpointType}

func testWorld(services, endpoints int) discovery.Snapshot {
	var s discovery.Snapshot
	for i := range services {
		svc := discovery.Service{Name: fmt.Sprintf("svc-%d", i)}
		for j := range endpoints {
			svc.Endpoints = append(svc.Endpoints, discovery.Endpoint{
				ID: fmt.Sprintf("svc-%d-%d", i, j), Address: "127.0.0.1", Port: 10000 + 100*i + j,
				Health: discovery.HealthHealthy, Meta: map[string]string{},
			})
		}
		s.Services = append(s.Services, svc)
	}
	return s
}

type fixture struct {
	srv  *xds.Server
	reg  *prometheus.Registry
	conn *grpc.ClientConn
}

// start runs a real xDS server on a loopback port and dials it.
func start(t *testing.T) *fixture {
	t.Helper()
	return startWith(t, xds.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// startWith is start with cfg (its debounce and registerer are set here)
// and more dial options.
func startWith(t *testing.T, cfg xds.Config, dial ...grpc.DialOption) *fixture {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Debounce, cfg.Registerer = 5*time.Millisecond, reg
	srv, err := xds.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Run(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		srv.Shutdown(sctx)
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &fixture{srv: srv, reg: reg, conn: conn}
}

func (f *fixture) client(t *testing.T, cfg harness.ADSConfig) *harness.ADSClient {
	t.Helper()
	cfg.Conn = f.conn
	if cfg.Types == nil {
		cfg.Types = allTypes
	}
	c, err := harness.StartADS(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// next returns the next update of type typeURL, skipping others.
func next(t *testing.T, c *harness.ADSClient, typeURL string) harness.ADSUpdate {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case u := <-c.Updates():
			if u.TypeURL == typeURL {
				return u
			}
		case <-timeout:
			t.Fatalf("no %s update within 10s", typeURL)
		}
	}
}

// firstOfEach returns the first update of each of the given types.
func firstOfEach(t *testing.T, c *harness.ADSClient, types []string) map[string]harness.ADSUpdate {
	t.Helper()
	out := map[string]harness.ADSUpdate{}
	timeout := time.After(10 * time.Second)
	for len(out) < len(types) {
		select {
		case u := <-c.Updates():
			if _, seen := out[u.TypeURL]; !seen && slices.Contains(types, u.TypeURL) {
				out[u.TypeURL] = u
			}
		case <-timeout:
			t.Fatalf("within 10s got only %d of the types %v", len(out), types)
		}
	}
	return out
}

func names(u harness.ADSUpdate) []string {
	var out []string
	for n := range u.Resources {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func TestServesEveryTypeOverSotWAndDelta(t *testing.T) {
	for _, delta := range []bool{false, true} {
		t.Run(fmt.Sprintf("delta=%v", delta), func(t *testing.T) {
			f := start(t)
			f.srv.Update(testWorld(2, 3))
			c := f.client(t, harness.ADSConfig{NodeID: "n1", Delta: delta})
			for typ, u := range firstOfEach(t, c, allTypes) {
				if got := names(u); !slices.Equal(got, []string{"svc-0", "svc-1"}) {
					t.Errorf("%s: resources %v, want svc-0 and svc-1", typ, got)
				}
			}
			w := testWorld(2, 3)
			w.Services[1].Endpoints[0].Health = discovery.HealthDraining
			f.srv.Update(w)
			u := next(t, c, resource.EndpointType)
			if !slices.Equal(u.Carried, []string{"svc-1"}) {
				t.Errorf("EDS update carries %v, want only what changed: svc-1", u.Carried)
			}
			want := []string{"svc-0", "svc-1"} // SotW: what the client has
			if delta {
				want = []string{"svc-1"} // delta: what the response carries
			}
			if got := names(u); !slices.Equal(got, want) {
				t.Errorf("EDS update: resources %v, want %v", got, want)
			}
		})
	}
}

// TestSotWFullState: with Config.SotWFullState (xds.sotw_full_state) a
// SotW EDS response carries every load assignment again.
func TestSotWFullState(t *testing.T) {
	f := startWith(t, xds.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SotWFullState: true})
	f.srv.Update(testWorld(2, 3))
	c := f.client(t, harness.ADSConfig{NodeID: "n1"})
	firstOfEach(t, c, allTypes)
	w := testWorld(2, 3)
	w.Services[1].Endpoints[0].Health = discovery.HealthDraining
	f.srv.Update(w)
	if u := next(t, c, resource.EndpointType); !slices.Equal(u.Carried, []string{"svc-0", "svc-1"}) {
		t.Errorf("EDS update carries %v, want every load assignment", u.Carried)
	}
}

func TestEnvoyNodesGetNoAPIListeners(t *testing.T) {
	f := start(t)
	f.srv.Update(testWorld(1, 1))
	c := f.client(t, harness.ADSConfig{NodeID: "envoy-1", Agent: "envoy", Types: []string{resource.ClusterType, resource.ListenerType}})
	first := firstOfEach(t, c, []string{resource.ClusterType, resource.ListenerType})
	if got := names(first[resource.ClusterType]); len(got) != 1 {
		t.Fatalf("clusters %v", got)
	}
	if got := names(first[resource.ListenerType]); len(got) != 0 {
		t.Errorf("envoy node got api_listeners %v", got)
	}
}

func TestNACKIsCountedAndRecorded(t *testing.T) {
	f := start(t)
	f.srv.Update(testWorld(1, 2))
	c := f.client(t, harness.ADSConfig{NodeID: "picky", Types: []string{resource.ClusterType, resource.EndpointType},
		Reject: func(u harness.ADSUpdate) error {
			if u.TypeURL == resource.EndpointType {
				return fmt.Errorf("endpoint rejected by test")
			}
			return nil
		}})
	next(t, c, resource.ClusterType)
	eventually(t, func() bool {
		return testutil.CollectAndCount(f.reg, "xds_nacks_total") == 1
	})
	nodes := f.srv.Nodes()
	if len(nodes) != 1 || nodes[0].LastNACK == nil || nodes[0].LastNACK.Error != "endpoint rejected by test" {
		t.Fatalf("NACK not recorded: %+v", nodes)
	}
	cfg, ok, err := f.srv.Config("picky")
	if err != nil || !ok || len(cfg.Resources["endpoint"].Resources) != 1 {
		t.Fatalf("the node's config must stay available after a NACK: %+v %v %v", cfg, ok, err)
	}
}

func TestShutdownEndsStreams(t *testing.T) {
	f := start(t)
	f.srv.Update(testWorld(1, 1))
	c := f.client(t, harness.ADSConfig{NodeID: "n1"})
	next(t, c, resource.EndpointType)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { f.srv.Shutdown(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not end the open stream within 5s")
	}
	if ctx.Err() != nil {
		t.Error("Shutdown needed the deadline: streams were cut, not ended")
	}
}

// eventually polls a server-side counter that has no event to await.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// After StopAccepting, a new stream is refused while an open one keeps
// getting updates; the server is no longer ready.
func TestStopAcceptingKeepsOpenStreams(t *testing.T) {
	f := start(t)
	f.srv.Update(testWorld(1, 1))
	c := f.client(t, harness.ADSConfig{NodeID: "n1"})
	first := next(t, c, resource.EndpointType)
	if !f.srv.Ready() {
		t.Fatal("not ready before shutdown")
	}
	f.srv.StopAccepting()
	if f.srv.Ready() {
		t.Error("still ready while shutting down")
	}
	// A new stream on the same connection is refused (GOAWAY).
	late, err := harness.StartADS(context.Background(), harness.ADSConfig{Conn: f.conn, NodeID: "n2", Types: allTypes})
	if err == nil {
		select {
		case u := <-late.Updates():
			t.Errorf("a stream opened after StopAccepting got %s", u.TypeURL)
		case <-time.After(500 * time.Millisecond): // nothing to await: proving an absence
		}
		_ = late.Close()
	}
	f.srv.Update(testWorld(1, 2))
	if u := next(t, c, resource.EndpointType); u.Version == first.Version {
		t.Errorf("the open stream got no new endpoints during the grace (version %s)", u.Version)
	}
}
