package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"

	"github.com/xds-server/xds-server/e2e/harness"
)

// TestPartialEDSKeepsOtherServices runs the real binary on a static file
// of two services, alpha and beta, each with two real gRPC backends, and
// grpc-go's own xDS client (SotW) calling both through xds:///alpha and
// xds:///beta. When only alpha's endpoints change, the EDS response
// carries alpha's load assignment alone (a raw SotW ADS client sees a
// response of one resource), and yet RPCs to both services keep
// succeeding: grpc-go keeps beta's load assignment, and alpha's traffic
// moves to its new endpoints. Then the same with beta changing.
func TestPartialEDSKeepsOtherServices(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	b := map[string]*harness.Backend{}
	for _, id := range []string{"alpha-1", "alpha-2", "alpha-3", "beta-1", "beta-2", "beta-3"} {
		b[id] = harness.StartBackend(t, id)
	}
	endpoints := filepath.Join(t.TempDir(), "endpoints.yaml")
	catalog := func(alpha, beta []string) {
		t.Helper()
		var s strings.Builder
		s.WriteString("services:\n")
		for name, ids := range map[string][]string{"alpha": alpha, "beta": beta} {
			fmt.Fprintf(&s, "  - name: %s\n    endpoints:\n", name)
			for _, id := range ids {
				fmt.Fprintf(&s, "      - { id: %s, address: %s, port: %d }\n", id, b[id].Host, b[id].Port)
			}
		}
		tmp := endpoints + ".tmp" // renamed into place: the server never reads half a file
		write(t, tmp, s.String())
		if err := os.Rename(tmp, endpoints); err != nil {
			t.Fatal(err)
		}
	}
	catalog([]string{"alpha-1", "alpha-2"}, []string{"beta-1", "beta-2"})
	srv := harness.StartServer(t, "--discovery.static.file", endpoints, "--discovery.static.poll_interval", "50ms",
		"--xds.debounce", "10ms")
	srv.WaitReady(t)

	// A raw SotW client sees what each EDS response carries.
	conn, err := grpc.NewClient(srv.XDSAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	observer, err := harness.StartADS(context.Background(), harness.ADSConfig{Conn: conn, NodeID: "observer", Cluster: "e2e",
		Types: []string{resource.ClusterType, resource.EndpointType}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = observer.Close() })
	nextEDS := func() harness.ADSUpdate {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			select {
			case u := <-observer.Updates():
				if u.TypeURL == resource.EndpointType {
					return u
				}
			case <-timeout:
				t.Fatal("no EDS response within 20s")
			}
		}
	}
	if u := nextEDS(); !slices.Equal(u.Carried, []string{"alpha", "beta"}) {
		t.Fatalf("first EDS response carries %v, want alpha and beta", u.Carried)
	}

	// grpc-go's xDS client, one node for both services.
	rb, err := xds.NewXDSResolverWithConfigForTesting([]byte(fmt.Sprintf(`{
		"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": "grpc-partial", "cluster": "e2e"}
	}`, srv.XDSAddr)))
	if err != nil {
		t.Fatal(err)
	}
	call := map[string]callFunc{}
	for _, svc := range []string{"alpha", "beta"} {
		c, err := grpc.NewClient("xds:///"+svc, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(rb))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		call[svc] = unaryCall(c)
	}
	awaitAll(t, call["alpha"], []string{"alpha-1", "alpha-2"}, 30*time.Second)
	awaitAll(t, call["beta"], []string{"beta-1", "beta-2"}, 30*time.Second)

	for _, step := range []struct {
		changed     string
		alpha, beta []string
	}{
		{"alpha", []string{"alpha-1", "alpha-3"}, []string{"beta-1", "beta-2"}},
		{"beta", []string{"alpha-1", "alpha-3"}, []string{"beta-2", "beta-3"}},
	} {
		catalog(step.alpha, step.beta)
		if u := nextEDS(); !slices.Equal(u.Carried, []string{step.changed}) {
			t.Fatalf("%s changed: the EDS response carries %v, want %s alone", step.changed, u.Carried, step.changed)
		} else if got := slices.Sorted(maps.Keys(u.Resources)); !slices.Equal(got, []string{"alpha", "beta"}) {
			t.Errorf("%s changed: the observer's view holds %v, want alpha and beta", step.changed, got)
		}
		want := map[string][]string{"alpha": step.alpha, "beta": step.beta}
		other := "beta"
		if step.changed == "beta" {
			other = "alpha"
		}
		// The changed service's traffic moves to its new endpoints ...
		awaitOnly(t, call[step.changed], want[step.changed], 10*time.Second)
		// ... and both keep answering, each on its own endpoints.
		for _, svc := range []string{other, step.changed} {
			seen := map[string]int{}
			for range 40 {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				id, err := call[svc](ctx)
				cancel()
				if err != nil {
					t.Fatalf("%s changed: RPC to %s failed: %v", step.changed, svc, err)
				}
				seen[id]++
			}
			if got := slices.Sorted(maps.Keys(seen)); !slices.Equal(got, want[svc]) {
				t.Errorf("%s changed: RPCs to %s reached %v, want %v", step.changed, svc, seen, want[svc])
			}
		}
	}
}

// awaitOnly makes RPCs until a run of them reaches every backend in want
// and no other.
func awaitOnly(t *testing.T, call callFunc, want []string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	seen := map[string]int{}
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		id, err := call(ctx)
		cancel()
		if err != nil {
			continue
		}
		if !slices.Contains(want, id) {
			clear(seen) // an old endpoint still served: start over
			continue
		}
		if seen[id]++; len(seen) == len(want) && seen[want[0]] > 3 {
			return
		}
	}
	t.Fatalf("within %v RPCs never reached only %v (last run %v)", limit, want, seen)
}
