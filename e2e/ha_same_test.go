package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xds-server/xds-server/e2e/harness"
)

var haTypes = []string{resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.RouteType}

// haConfig: subsets of 2 for every service, and a listener with routes
// and a rate limit (so Envoy nodes get LDS, RDS and the RLS cluster).
const haConfig = `
services:
  "*": { subset_size: 2 }
listeners:
  - name: ingress
    address: 127.0.0.1:10000
    routes:
      - { prefix: /grpc.testing.TestService/UnaryCall, service: echo, timeout: 2s }
      - { prefix: /, service: echo }
    ratelimit:
      domain: edge
      actions: [[{ remote_address: {} }]]
`

// startHAReplicas runs n xds-server replicas sharing consul for discovery
// and for client indices and endpoint slots (haConfig), and waits until
// each is ready.
func startHAReplicas(t *testing.T, consul *harness.ConsulAgent, n int) []*harness.Server {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "xds-server.yaml")
	if err := os.WriteFile(cfg, []byte(haConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	srvs := harness.StartReplicas(t, n,
		"--config", cfg, "--discovery.source", "consul", "--discovery.consul.address", consul.Addr(),
		"--discovery.consul.min_interval", "10ms", "--xds.debounce", "10ms",
		"--subsetting.index_source", "consul", "--subsetting.index_ttl", "10m",
		// One address for every replica's RLS, as a Service or VIP in front of them.
		"--ratelimit.advertise_address", "ratelimit.xds-server.internal:18081")
	for _, s := range srvs {
		s.WaitReady(t)
	}
	return srvs
}

// adsFetch opens a raw ADS stream to srv as cfg's node, subscribed to
// every type, and returns the first response of each; the stream stays
// open until the returned client is closed (or the test ends).
func adsFetch(t *testing.T, srv *harness.Server, cfg harness.ADSConfig) (*harness.ADSClient, map[string]harness.ADSUpdate) {
	t.Helper()
	conn, err := grpc.NewClient(srv.XDSAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	cfg.Conn, cfg.Types = conn, haTypes
	c, err := harness.StartADS(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	out := map[string]harness.ADSUpdate{}
	if len(cfg.Resume) > 0 {
		return c, out
	}
	timeout := time.After(30 * time.Second)
	for len(out) < len(haTypes) {
		select {
		case u := <-c.Updates():
			if _, seen := out[u.TypeURL]; !seen {
				out[u.TypeURL] = u
			}
		case <-timeout:
			t.Fatalf("node %s got only %d of %d types from %s", cfg.NodeID, len(out), len(haTypes), srv.XDSAddr)
		}
	}
	return c, out
}

// sameUpdates describes how two nodes' first responses differ ("" if
// they are byte-identical, versions included).
func sameUpdates(a, b map[string]harness.ADSUpdate) string {
	var out bytes.Buffer
	for _, url := range haTypes {
		ua, ub := a[url], b[url]
		if ua.Version != ub.Version {
			fmt.Fprintf(&out, "%s: version %q vs %q; ", url, ua.Version, ub.Version)
		}
		if na, nb := slices.Sorted(maps.Keys(ua.Resources)), slices.Sorted(maps.Keys(ub.Resources)); !slices.Equal(na, nb) {
			fmt.Fprintf(&out, "%s: %v vs %v; ", url, na, nb)
			continue
		}
		for n, r := range ua.Resources {
			if !bytes.Equal(r.GetValue(), ub.Resources[n].GetValue()) || ua.Versions[n] != ub.Versions[n] {
				fmt.Fprintf(&out, "%s %s differs; ", url, n)
			}
		}
	}
	return out.String()
}

// debugNode is a node as /debug/nodes shows it.
type debugNode struct {
	ID      string `json:"id"`
	Streams int    `json:"streams"`
	Index   int    `json:"subset_index"`
	Source  string `json:"subset_index_source"`
}

// findNode reads /debug/nodes of srv for node id.
func findNode(t *testing.T, srv *harness.Server, id string) (debugNode, bool) {
	t.Helper()
	var got struct {
		Nodes []debugNode `json:"nodes"`
	}
	getJSON(t, srv.AdminURL("/debug/nodes"), &got)
	for _, n := range got.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return debugNode{}, false
}

// awaitConnected polls /debug/nodes of srv (an external process: there is
// no event to await) until node id has a stream open there.
func awaitConnected(t *testing.T, srv *harness.Server, id string, limit time.Duration) debugNode {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if n, ok := findNode(t, srv, id); ok && n.Streams > 0 {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s did not connect to %s within %v", id, srv.XDSAddr, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHAResumeOnAnotherReplica runs three real xds-server replicas sharing
// a real Consul. Envoy-like and proxyless nodes, over SotW and delta, get
// byte-identical resources with identical versions from all; a node that
// got its config from a and reconnects to b with its last versions
// (version_info; initial_resource_versions) gets no response from b, once
// b has registered it and within a window in which a response would have
// arrived; a node resuming from versions b does not have is answered.
func TestHAResumeOnAnotherReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	consul := harness.Consul(t)
	registerEcho(t, consul, startEcho(t, 6), "")
	srvs := startHAReplicas(t, consul, 3)
	a, b, c := srvs[0], srvs[1], srvs[2]
	const window = 2 * time.Second
	for _, agent := range []string{"envoy", "grpc-go/1.85.0"} {
		for _, delta := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/delta=%v", agent, delta), func(t *testing.T) {
				cfg := harness.ADSConfig{NodeID: fmt.Sprintf("%s-%v", agent[:4], delta), Cluster: "e2e", Agent: agent, Delta: delta}
				ca, fromA := adsFetch(t, a, cfg)
				_ = ca.Close()
				if n := lbEndpointCount(t, fromA[resource.EndpointType]); n != 2 {
					t.Errorf("echo: %d endpoints served, want a subset of 2", n)
				}
				if fromA[resource.ListenerType].Resources["ingress"] == nil || fromA[resource.RouteType].Resources["ingress"] == nil {
					t.Errorf("the configured listener or its route is missing: %v", fromA)
				}
				cfg.Resume = map[string]harness.Resume{}
				for url, u := range fromA {
					cfg.Resume[url] = harness.Resume{Version: u.Version, Versions: u.Versions}
				}
				cb, _ := adsFetch(t, b, cfg)
				awaitConnected(t, b, cfg.NodeID, 10*time.Second)
				for _, u := range collectFor(cb, window) {
					if delta && len(cfg.Resume[u.TypeURL].Versions) == 0 && len(u.Resources) == 0 && len(u.Removed) == 0 {
						continue // a type the node has none of: go-control-plane's empty first answer
					}
					t.Errorf("replica b answered the resumed node: %s version %q (%d resources)", u.TypeURL, u.Version, len(u.Resources))
				}
				_ = cb.Close()
				// Without resuming, b and c send exactly what a sends.
				cfg.Resume = nil
				cfg.NodeID += "-fresh"
				_, freshA := adsFetch(t, a, cfg)
				for name, other := range map[string]*harness.Server{"b": b, "c": c} {
					_, fresh := adsFetch(t, other, cfg)
					if d := sameUpdates(freshA, fresh); d != "" {
						t.Errorf("replicas a and %s differ: %s", name, d)
					}
				}
			})
		}
	}
	t.Run("stale versions are answered", func(t *testing.T) {
		cfg := harness.ADSConfig{NodeID: "stale", Cluster: "e2e", Agent: "envoy", Resume: map[string]harness.Resume{}}
		for _, url := range haTypes {
			cfg.Resume[url] = harness.Resume{Version: "stale"}
		}
		c, _ := adsFetch(t, b, cfg)
		awaitConnected(t, b, cfg.NodeID, 10*time.Second)
		if got := collectFor(c, window); len(got) < len(haTypes) {
			t.Errorf("a node resuming from stale versions got %d responses within %v, want one per type", len(got), window)
		}
	})
}

// collectFor returns the updates c accepts within d.
func collectFor(c *harness.ADSClient, d time.Duration) []harness.ADSUpdate {
	var got []harness.ADSUpdate
	timeout := time.After(d)
	for {
		select {
		case u := <-c.Updates():
			got = append(got, u)
		case <-timeout:
			return got
		}
	}
}

// lbEndpointCount counts the endpoints of echo's load assignment in u.
func lbEndpointCount(t *testing.T, u harness.ADSUpdate) int {
	t.Helper()
	a := u.Resources["echo"]
	if a == nil {
		t.Fatalf("no load assignment of echo in %v", slices.Collect(maps.Keys(u.Resources)))
	}
	var cla endpointv3.ClusterLoadAssignment
	if err := a.UnmarshalTo(&cla); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range cla.GetEndpoints() {
		n += len(l.GetLbEndpoints())
	}
	return n
}
