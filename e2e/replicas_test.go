package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xds-server/xds-server/e2e/harness"
)

// TestReplicasShareIndicesThroughConsul runs two xds-server replicas with
// subsetting.index_source consul against one real Consul: nodes connecting
// through either replica get distinct, dense indices, a node moving from
// one replica to the other keeps its index, and so both replicas send it
// the same endpoints.
func TestReplicasShareIndicesThroughConsul(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	consul := harness.Consul(t)
	registerEcho(t, consul, startEcho(t, 6), "")
	cfg := filepath.Join(t.TempDir(), "xds-server.yaml")
	if err := os.WriteFile(cfg, []byte("services:\n  \"*\": { subset_size: 2 }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config", cfg, "--subsetting.index_source", "consul", "--subsetting.index_ttl", "10m"}
	a, b := startServer(t, consul, args...), startServer(t, consul, args...)

	// n0 and n2 through a, n1 through b, one after the other.
	n0 := connectNode(t, a, "n0")
	awaitIndex(t, a, "n0", 0)
	connectNode(t, b, "n1")
	awaitIndex(t, b, "n1", 1)
	connectNode(t, a, "n2")
	awaitIndex(t, a, "n2", 2)
	before := readSubsets(t, a)["n0"]

	// n0 moves from a to b: same index, same endpoints.
	_ = n0.Close()
	connectNode(t, b, "n0")
	awaitIndex(t, b, "n0", 0)
	if after := readSubsets(t, b)["n0"]; fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("n0 got %v through replica a but %v through replica b", before, after)
	}
}

// connectNode opens a delta ADS stream to srv as node id and waits for
// its first load assignment of echo.
func connectNode(t *testing.T, srv *harness.Server, id string) *harness.ADSClient {
	t.Helper()
	conn, err := grpc.NewClient(srv.XDSAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ads, err := harness.StartADS(context.Background(), harness.ADSConfig{
		Conn: conn, NodeID: id, Cluster: "e2e", Delta: true, Types: []string{resource.EndpointType},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ads.Close() })
	timeout := time.After(30 * time.Second)
	for {
		select {
		case u := <-ads.Updates():
			if _, ok := u.Resources["echo"]; ok && u.TypeURL == resource.EndpointType {
				return ads
			}
		case <-timeout:
			t.Fatalf("node %s got no load assignment of echo from %s", id, srv.XDSAddr)
		}
	}
}

// awaitIndex checks /debug/nodes until node id is connected with index want.
func awaitIndex(t *testing.T, srv *harness.Server, id string, want int) {
	t.Helper()
	var got struct {
		Nodes []struct {
			ID     string `json:"id"`
			Index  int    `json:"subset_index"`
			Source string `json:"subset_index_source"`
		} `json:"nodes"`
	}
	getJSON(t, "http://"+srv.AdminAddr+"/debug/nodes", &got)
	for _, n := range got.Nodes {
		if n.ID == id {
			if n.Index != want || n.Source != "consul" {
				t.Errorf("node %s: index %d from %q, want %d from consul", id, n.Index, n.Source, want)
			}
			return
		}
	}
	t.Errorf("node %s is not in /debug/nodes of %s", id, srv.AdminAddr)
}
