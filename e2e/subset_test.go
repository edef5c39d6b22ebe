package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
)

// subsetReport is the part of /debug/subsets this test reads.
type subsetReport struct {
	Subsetting bool `json:"subsetting"`
	Nodes      []struct {
		ID        string   `json:"id"`
		Index     int      `json:"index"`
		Connected bool     `json:"connected"`
		Subset    []string `json:"subset"`
		Endpoints []string `json:"endpoints"`
	} `json:"nodes"`
}

// TestSubsetsWithRealClients serves 9 real backends from a real Consul
// with subset_size 3 to three grpc-go xDS clients (each its own node), for
// both algorithms: each client's RPCs reach exactly its 3 endpoints (with
// classic, the union covers all 9 and each backend serves exactly one
// client); when a backend in exactly one client's subset turns critical,
// that client gets a replacement within 2 s and no other client's
// endpoints change.
func TestSubsetsWithRealClients(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	consul := harness.Consul(t)
	backends := startEcho(t, 9)
	registerEcho(t, consul, backends, "")
	for _, alg := range []string{"steady", "classic"} {
		t.Run(alg, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "xds-server.yaml")
			body := fmt.Sprintf("services:\n  \"*\": { subset_size: 3, subsetting: %s }\n", alg)
			if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			srv := startServer(t, consul, "--config", cfg)
			calls := map[string]callFunc{}
			for i := range 3 { // one at a time: indices 0, 1, 2 in order
				id := fmt.Sprintf("%s-client-%d", alg, i)
				calls[id] = dialGRPCXDSAs(t, srv.XDSAddr, id)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := calls[id](ctx) // channels connect on their first RPC
				cancel()
				if err != nil {
					t.Fatalf("%s: first RPC: %v", id, err)
				}
			}
			subsets := awaitSubsets(t, srv, slices.Sorted(maps.Keys(calls)))
			if alg == "classic" { // steady trades exact balance for low churn
				checkPartition(t, subsets, backends)
			}
			for id, call := range calls {
				awaitExactly(t, call, subsets[id], 30*time.Second)
			}

			// A backend in exactly one client's subset turns critical.
			owner, victim := soleHolder(t, subsets)
			if err := consul.Client().Agent().UpdateTTL("ttl-"+victim, "e2e", api.HealthCritical); err != nil {
				t.Fatal(err)
			}
			critical := time.Now()
			t.Cleanup(func() { _ = consul.Client().Agent().UpdateTTL("ttl-"+victim, "e2e", api.HealthPassing) })
			lastHit := callFor(t, calls[owner], victim, 3*time.Second)
			if lag := lastHit.Sub(critical); lag > 2*time.Second {
				t.Errorf("RPCs of %s reached %s %v after it turned critical; want < 2s", owner, victim, lag)
			}
			after := readSubsets(t, srv)
			got := after[owner]
			if len(got) != 4 || !slices.Contains(got, victim) {
				t.Fatalf("%s has endpoints %v; want its 3 plus one replacement, %s kept as not serving", owner, got, victim)
			}
			serving := slices.DeleteFunc(slices.Clone(got), func(e string) bool { return e == victim })
			awaitExactly(t, calls[owner], serving, 10*time.Second)
			for id := range calls {
				if id != owner && !slices.Equal(after[id], subsets[id]) {
					t.Errorf("%s's endpoints changed from %v to %v; only %s's may", id, subsets[id], after[id], owner)
				}
			}
		})
	}
}

// readSubsets returns, per connected node, the endpoints it was sent.
func readSubsets(t *testing.T, srv *harness.Server) map[string][]string {
	t.Helper()
	var rep subsetReport
	getJSON(t, "http://"+srv.AdminAddr+"/debug/subsets?service="+url.QueryEscape("echo"), &rep)
	if !rep.Subsetting {
		t.Fatalf("/debug/subsets?service=echo: subsetting is off")
	}
	out := map[string][]string{}
	for _, n := range rep.Nodes {
		if n.Connected {
			out[n.ID] = n.Endpoints
		}
	}
	return out
}

// awaitSubsets waits until every node in ids is connected with 3 endpoints.
func awaitSubsets(t *testing.T, srv *harness.Server, ids []string) map[string][]string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := readSubsets(t, srv)
		done := true
		for _, id := range ids {
			done = done && len(got[id]) == 3
		}
		if done {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes %v did not all get 3 endpoints: %v", ids, got)
		}
		time.Sleep(50 * time.Millisecond) // polling an HTTP page: no event to await
	}
}

// checkPartition checks that the subsets cover every backend exactly once.
func checkPartition(t *testing.T, subsets map[string][]string, backends []*harness.Backend) {
	t.Helper()
	count := map[string]int{}
	for _, s := range subsets {
		for _, e := range s {
			count[e]++
		}
	}
	for _, b := range backends {
		if count[b.ID] != 1 {
			t.Errorf("backend %s is in %d subsets, want exactly 1 (subsets %v)", b.ID, count[b.ID], subsets)
		}
	}
}

// soleHolder picks a backend that is in exactly one node's subset.
func soleHolder(t *testing.T, subsets map[string][]string) (node, backend string) {
	t.Helper()
	holders := map[string][]string{}
	for n, s := range subsets {
		for _, e := range s {
			holders[e] = append(holders[e], n)
		}
	}
	for _, e := range slices.Sorted(maps.Keys(holders)) {
		if len(holders[e]) == 1 {
			return holders[e][0], e
		}
	}
	t.Fatalf("no backend is in exactly one subset: %v", subsets)
	return "", ""
}

// awaitExactly makes RPCs until they have reached every backend in want,
// then keeps calling and fails if any RPC reaches a backend outside want.
func awaitExactly(t *testing.T, call callFunc, want []string, limit time.Duration) {
	t.Helper()
	awaitAll(t, call, want, limit)
	for range 30 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		id, err := call(ctx)
		cancel()
		if err != nil {
			t.Fatalf("RPC failed: %v", err)
		}
		if !slices.Contains(want, id) {
			t.Fatalf("an RPC reached %s, outside the node's endpoints %v", id, want)
		}
	}
}
