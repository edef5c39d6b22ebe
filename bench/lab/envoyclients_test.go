package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xds-server/xds-server/config"
	"github.com/xds-server/xds-server/envoy"
)

// TestClientsOption: --clients picks the kind of clients or their count;
// both kinds have the same count, the same fleet.
func TestClientsOption(t *testing.T) {
	for name, tc := range map[string]struct {
		args    []string
		kind    string
		clients int
		charts  string
		invalid bool
	}{
		"grpc-go by default":             {kind: grpcClients, clients: 36},
		"grpc-go, quick":                 {args: []string{"--quick"}, kind: grpcClients, clients: 18},
		"a count alone stays grpc-go":    {args: []string{"--clients", "20"}, kind: grpcClients, clients: 20},
		"envoy: the same fleet":          {args: []string{"--clients", "envoy"}, kind: envoyClients, clients: 36},
		"envoy, quick":                   {args: []string{"--clients=envoy", "--quick"}, kind: envoyClients, clients: 18},
		"envoy with a count":             {args: []string{"--clients", "30", "--clients", "envoy"}, kind: envoyClients, clients: 30},
		"envoy charts apart":             {args: []string{"--clients", "envoy", "--markdown", "B.md"}, kind: envoyClients, clients: 36, charts: "bench/lab/charts/envoy"},
		"grpc charts":                    {args: []string{"--markdown", "B.md"}, kind: grpcClients, clients: 36, charts: "bench/lab/charts"},
		"another kind makes no lab":      {args: []string{"--clients", "curl"}, invalid: true},
		"no client nodes makes no lab":   {args: []string{"--clients", "envoy", "--clients", "0"}, invalid: true},
		"grpc named explicitly is grpc":  {args: []string{"--clients", "grpc"}, kind: grpcClients, clients: 36},
		"the last kind given is the one": {args: []string{"--clients", "envoy", "--clients", "grpc"}, kind: grpcClients, clients: 36},
	} {
		t.Run(name, func(t *testing.T) {
			o, err := parseOptions(tc.args, io.Discard)
			if (err != nil) != tc.invalid {
				t.Fatalf("error %v, want invalid %v", err, tc.invalid)
			}
			if tc.invalid {
				return
			}
			if o.kind != tc.kind || o.clients != tc.clients || o.charts != tc.charts {
				t.Errorf("kind %q, %d clients, charts %q; want %q, %d, %q", o.kind, o.clients, o.charts, tc.kind, tc.clients, tc.charts)
			}
		})
	}
}

// TestEnvoyBootstrap: client node i's Envoy bootstrap is a valid one
// (it parses back as Envoy would), names node lab-client-<i> with its
// subset index in its metadata, asks for an admin port from the kernel,
// and reports load (LRS) to xds-server's cluster, which balanced and
// per-node weights need.
func TestEnvoyBootstrap(t *testing.T) {
	y, err := envoyBootstrap("127.0.0.1:18000", 7)
	if err != nil {
		t.Fatal(err)
	}
	b, err := envoy.ParseBootstrapYAML(y)
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	n := b.GetNode()
	if n.GetId() != "lab-client-7" || n.GetCluster() != "lab" {
		t.Errorf("node %q of cluster %q, want lab-client-7 of lab", n.GetId(), n.GetCluster())
	}
	idx := n.GetMetadata().GetFields()["subset"].GetStructValue().GetFields()["index"].GetNumberValue()
	if idx != 7 {
		t.Errorf("metadata subset.index %v, want 7:\n%s", idx, y)
	}
	if port := b.GetAdmin().GetAddress().GetSocketAddress().GetPortValue(); port != 0 || b.GetAdmin() == nil {
		t.Errorf("admin port %d, want an admin listener on port 0", port)
	}
	lrs := b.GetClusterManager().GetLoadStatsConfig()
	if got := lrs.GetGrpcServices(); len(got) != 1 || got[0].GetEnvoyGrpc().GetClusterName() != envoy.XDSClusterName {
		t.Errorf("load_stats_config %v, want gRPC to cluster %s", lrs, envoy.XDSClusterName)
	}
}

// TestEnvoyServerConfig: with Envoys, every policy's xds-server config is
// one the product accepts, the service spoken over gRPC and a listener
// routing to it; grpc-go runs get neither.
func TestEnvoyServerConfig(t *testing.T) {
	for _, kind := range []string{grpcClients, envoyClients} {
		o := defaultOptions()
		o.kind = kind
		for _, p := range policies(o) {
			yml := p.serverConfig("127.0.0.1:8500", o)
			path := filepath.Join(t.TempDir(), "xds-server.yaml")
			if err := os.WriteFile(path, []byte(yml), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, errs := config.Load(config.Sources{File: path})
			if len(errs) > 0 {
				t.Fatalf("%s, %s: %v\n%s", kind, p.label(o.backends), errs, yml)
			}
			envoyish := strings.Contains(yml, "protocol: grpc") && strings.Contains(yml, "name: "+envoyListener)
			if envoyish != (kind == envoyClients) || (len(cfg.Listeners) == 1) != (kind == envoyClients) {
				t.Errorf("%s, %s: %d listeners, protocol grpc and listener %v:\n%s", kind, p.label(o.backends), len(cfg.Listeners), envoyish, yml)
			}
		}
	}
}

// TestParseEnvoyAdmin reads the listener's bound port and the cluster's
// hosts and weights from Envoy's admin JSON (as Envoy 1.40 writes it).
func TestParseEnvoyAdmin(t *testing.T) {
	listeners := `{"listener_statuses":[{"name":"other","local_address":{"socket_address":{"address":"127.0.0.1","port_value":1}}},
{"name":"lab-ingress","local_address":{"socket_address":{"address":"127.0.0.1","port_value":40123}}}]}`
	if got, err := parseListenerAddr([]byte(listeners), envoyListener); err != nil || got != "127.0.0.1:40123" {
		t.Errorf("listener at %q (%v), want 127.0.0.1:40123", got, err)
	}
	if _, err := parseListenerAddr([]byte(listeners), "missing"); err == nil {
		t.Error("a missing listener has an address")
	}
	clusters := `{"cluster_statuses":[{"name":"xds-server","host_statuses":[{"address":{"socket_address":{"address":"127.0.0.1","port_value":18000}}}]},
{"name":"lab","host_statuses":[{"address":{"socket_address":{"address":"127.0.0.1","port_value":41001}},"weight":2038,
"stats":[{"name":"rq_total","value":"12","type":"COUNTER"}],"health_status":{"eds_health_status":"HEALTHY"}},
{"address":{"socket_address":{"address":"127.0.0.1","port_value":41002}},"weight":100}]}]}`
	hosts, err := parseHosts([]byte(clusters), service)
	want := []envoyHost{{addr: "127.0.0.1:41001", weight: 2038}, {addr: "127.0.0.1:41002", weight: 100}}
	if err != nil || len(hosts) != 2 || hosts[0] != want[0] || hosts[1] != want[1] {
		t.Errorf("hosts %+v (%v), want %+v", hosts, err, want)
	}
	if _, err := parseHosts([]byte(clusters), "missing"); err == nil {
		t.Error("a missing cluster has hosts")
	}
	bs := []*backend{{grpc: "127.0.0.1:41000"}, {grpc: "127.0.0.1:41001"}, {grpc: "127.0.0.1:41002"}}
	if !sameSubset(hosts, []int{2, 1}, bs) || sameSubset(hosts, []int{0, 1}, bs) || sameSubset(hosts, []int{1}, bs) {
		t.Error("sameSubset: want the hosts to be backends {1, 2} only")
	}
}

// TestOnlyAlternatives: --only keeps the policies whose label contains
// any of its |-separated parts.
func TestOnlyAlternatives(t *testing.T) {
	o := defaultOptions()
	o.only = roundRobin + "|" + perNode
	var got []string
	for _, p := range selected(o) {
		got = append(got, p.label(o.backends))
	}
	want := []string{"round robin, subsets of 4", "per-node, subsets of 4", "round robin, no subsets"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("selected %q, want %q", got, want)
	}
}
