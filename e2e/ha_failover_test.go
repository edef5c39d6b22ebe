package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/xds"

	"github.com/xds-server/xds-server/e2e/harness"
)

// nodeVersions reads the versions /debug/config of srv shows for node id,
// by short type name, polling (an external process: no event to await)
// until the node has been given a version of every type.
func nodeVersions(t *testing.T, srv *harness.Server, id string) map[string]string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var cfg struct {
			Resources map[string]struct {
				Version string `json:"version"`
			} `json:"resources"`
		}
		getJSON(t, srv.AdminURL("/debug/config?node="+url.QueryEscape(id)), &cfg)
		out := make(map[string]string, len(cfg.Resources))
		for k, v := range cfg.Resources {
			if v.Version != "" {
				out[k] = v.Version
			}
		}
		if len(out) == len(haTypes) || time.Now().After(deadline) {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// replicaResolver registers, under a scheme of its own, a resolver that
// gives grpc-go the addresses of every replica, as a DNS name or an L4
// balancer in front of them would; pick_first uses the first that answers.
func replicaResolver(t *testing.T, srvs []*harness.Server) string {
	t.Helper()
	scheme := fmt.Sprintf("xds-replicas-%d", time.Now().UnixNano())
	r := manual.NewBuilderWithScheme(scheme)
	var addrs []resolver.Address
	for _, s := range srvs {
		addrs = append(addrs, resolver.Address{Addr: s.XDSAddr})
	}
	r.InitialState(resolver.State{Addresses: addrs})
	resolver.Register(r)
	return scheme + ":///xds-server"
}

// TestHAFailoverKeepsConfigAndIndex: a grpc-go xDS client of two real
// replicas, connected to a, is moved to b by kill -9 of a; there it has
// the same client index and the same config (versions of every type), and
// its RPCs keep reaching the same subset with none failing. Two ways to
// reach the replicas:
//   - one name for all replicas (as a DNS name or an L4 balancer gives):
//     grpc-go reconnects to b at once;
//   - a bootstrap listing both in xds_servers (gRFC A71): grpc-go keeps
//     its cached config while a is gone and falls back to b only when it
//     needs a resource it does not have (here: a new channel's target).
func TestHAFailoverKeepsConfigAndIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	for _, both := range []bool{false, true} {
		t.Run(map[bool]string{false: "one name", true: "bootstrap lists both"}[both], func(t *testing.T) {
			failover(t, both)
		})
	}
}

func failover(t *testing.T, bootstrapBoth bool) {
	consul := harness.Consul(t)
	registerEcho(t, consul, startEcho(t, 6), "")
	srvs := startHAReplicas(t, consul, 2)
	a, b := srvs[0], srvs[1]
	// Other nodes take indices first, through both replicas, so the
	// client's index is not simply 0.
	for i, s := range []*harness.Server{a, b, a} {
		adsFetch(t, s, harness.ADSConfig{NodeID: fmt.Sprint("other-", i), Cluster: "e2e"})
	}

	const id = "failover-node"
	servers := []string{replicaResolver(t, srvs)}
	if bootstrapBoth {
		servers = []string{a.XDSAddr, b.XDSAddr}
	}
	rb := xdsResolver(t, servers, id)
	call := unaryCall(dialWith(t, rb, "xds:///echo"))
	before := reached(t, call, 40)
	if len(before) != 2 {
		t.Fatalf("the client reached %v, want its subset of 2", before)
	}
	onA := awaitConnected(t, a, id, 10*time.Second)
	versionsA := nodeVersions(t, a, id)
	if onA.Source != "consul" || onA.Index < 3 {
		t.Errorf("on a: index %d from %q, want >= 3 from consul", onA.Index, onA.Source)
	}

	killed := time.Now()
	a.Kill(t)
	if bootstrapBoth {
		// Everything cached: grpc-go stays with a (retrying) and keeps its config.
		if got := reached(t, call, 20); !maps.Equal(got, before) {
			t.Errorf("with a gone, RPCs reached %v, before %v", got, before)
		}
		dialWith(t, rb, "xds:///echo-new").Connect() // a resource not cached: fallback
	}
	onB := awaitFailover(t, call, b, id, 60*time.Second)
	t.Logf("failover: the client was connected to b %v after a was killed", time.Since(killed).Round(time.Millisecond))
	if onB.Index != onA.Index || onB.Source != "consul" {
		t.Errorf("index on b: %d from %q, on a it was %d", onB.Index, onB.Source, onA.Index)
	}
	if vb := nodeVersions(t, b, id); !maps.Equal(vb, versionsA) {
		t.Errorf("config versions on b %v, on a they were %v", vb, versionsA)
	}
	if after := reached(t, call, 40); !maps.Equal(after, before) {
		t.Errorf("after failover RPCs reached %v, before %v", after, before)
	}
}

// awaitFailover makes RPCs (each must succeed) until node id has a stream
// open on b and its client index there.
func awaitFailover(t *testing.T, call callFunc, b *harness.Server, id string, limit time.Duration) debugNode {
	t.Helper()
	deadline := time.Now().Add(limit)
	for failures := 0; ; {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if _, err := call(ctx); err != nil {
			failures++
			t.Errorf("RPC %d after the kill failed: %v", failures, err)
		}
		cancel()
		if n, ok := findNode(t, b, id); ok && n.Streams > 0 && n.Source != "" {
			return n // connected and placed
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client did not reach replica b within %v of the kill", limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// xdsResolver is grpc-go's xDS resolver with a bootstrap of its own: node
// id (cluster e2e, zone zone-0), management servers in order.
func xdsResolver(t *testing.T, servers []string, id string) resolver.Builder {
	t.Helper()
	var list []string
	for _, s := range servers {
		list = append(list, fmt.Sprintf(`{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}`, s))
	}
	bootstrap := fmt.Sprintf(`{"xds_servers": [%s], "node": {"id": %q, "cluster": "e2e", "locality": {"zone": "zone-0"}}}`,
		strings.Join(list, ","), id)
	rb, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	return rb
}

// dialWith returns a channel to target through rb, closed at cleanup.
func dialWith(t *testing.T, rb resolver.Builder, target string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(rb))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// reached makes n RPCs (each must succeed) and returns the backends that
// served them.
func reached(t *testing.T, call callFunc, n int) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		id, err := call(ctx)
		cancel()
		if err != nil {
			t.Fatalf("RPC: %v", err)
		}
		out[id] = true
	}
	return out
}
