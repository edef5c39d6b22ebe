package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
)

// TestDrainSourcesORCAMetaTag drains three endpoints of one service, each
// by another source: its ORCA reports carry lame_duck=1 (xds-server streams
// ORCA from services with the orca weights source), its Consul meta says
// lame_duck=true, or it has the lame_duck tag. GET /v1/drain names each
// source, and clients send every RPC to the fourth endpoint.
func TestDrainSourcesORCAMetaTag(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	consul := harness.Consul(t)
	backends := startEcho(t, 4)
	backends[0].SetLoad(0.5, 100)
	backends[0].SetNamed("lame_duck", 1) // the first report, on stream open, carries it
	registerEcho(t, consul, backends, "")
	agent := consul.Client().Agent()
	reregister := func(i int, meta map[string]string, tags []string) {
		t.Helper()
		b := backends[i]
		err := agent.ServiceRegister(&api.AgentServiceRegistration{ID: b.ID, Name: "echo", Address: b.Host, Port: b.Port,
			Meta: meta, Tags: tags, Check: &api.AgentServiceCheck{CheckID: "ttl-" + b.ID, TTL: "10m", Status: api.HealthPassing}})
		if err != nil {
			t.Fatal(err)
		}
	}
	reregister(1, map[string]string{"lame_duck": "true"}, nil)
	reregister(2, nil, []string{"lame_duck"})
	cfg := t.TempDir() + "/xds-server.yaml"
	write(t, cfg, "services:\n  echo: { weights: { enabled: true, sources: [orca] } }\n")
	srv := startServer(t, consul, "--config", cfg)

	want := map[string]string{backends[0].ID: "orca", backends[1].ID: "meta", backends[2].ID: "tag"}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var st struct {
			Draining []struct {
				Endpoint string   `json:"endpoint"`
				Sources  []string `json:"sources"`
			} `json:"draining"`
		}
		got := map[string]string{}
		if tryGetJSON("http://"+srv.AdminAddr+"/v1/drain", &st) {
			for _, d := range st.Draining {
				if len(d.Sources) == 1 {
					got[d.Endpoint] = d.Sources[0]
				}
			}
		}
		if len(got) == len(want) && got[backends[0].ID] == "orca" && got[backends[1].ID] == "meta" && got[backends[2].ID] == "tag" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("draining = %v, want %v", got, want)
		}
		time.Sleep(50 * time.Millisecond) // polling an HTTP page of another process
	}
	call := dialGRPCXDS(t, srv.XDSAddr)
	awaitAll(t, call, []string{backends[3].ID}, 20*time.Second)
	for range 50 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		id, err := call(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if id != backends[3].ID {
			t.Fatalf("an RPC went to draining %s", id)
		}
	}
}
