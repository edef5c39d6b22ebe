package envoy

import (
	"encoding/json"
	"google.golang.org/grpc/xds"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
)

func TestBootstrap(t *testing.T) {
	base := BootstrapConfig{NodeID: "envoy-1", Cluster: "edge", XDSAddress: "127.0.0.1:18000", AdminAddress: "127.0.0.1:9901"}
	for name, tc := range map[string]struct {
		edit      func(*BootstrapConfig)
		apiType   corev3.ApiConfigSource_ApiType
		xdsType   clusterv3.Cluster_DiscoveryType
		noAdmin   bool
		zone      string
		endpoints int    // of the xds-server cluster; 0 means 1
		wantError string // substring; "" means success
	}{
		"state of the world to an IP": {apiType: corev3.ApiConfigSource_GRPC, xdsType: clusterv3.Cluster_STATIC},
		"delta to a host name": {
			edit:    func(c *BootstrapConfig) { c.Delta, c.XDSAddress = true, "xds-server:18000" },
			apiType: corev3.ApiConfigSource_DELTA_GRPC, xdsType: clusterv3.Cluster_STRICT_DNS,
		},
		"no admin, with locality": {
			edit:    func(c *BootstrapConfig) { c.AdminAddress, c.Locality = "", Locality{Region: "eu", Zone: "eu-1"} },
			apiType: corev3.ApiConfigSource_GRPC, xdsType: clusterv3.Cluster_STATIC, noAdmin: true, zone: "eu-1",
		},
		"IPv6 xds address": {
			edit:    func(c *BootstrapConfig) { c.XDSAddress = "[::1]:18000" },
			apiType: corev3.ApiConfigSource_GRPC, xdsType: clusterv3.Cluster_STATIC,
		},
		"empty node id": {edit: func(c *BootstrapConfig) { c.NodeID = " " }, wantError: "node id is empty"},
		"empty cluster": {edit: func(c *BootstrapConfig) { c.Cluster = "" }, wantError: "node cluster is empty"},
		"two replicas, admin on any port": {
			edit: func(c *BootstrapConfig) {
				c.XDSAddress, c.AdminAddress = "127.0.0.1:18000, 127.0.0.2:18000", "127.0.0.1:0"
			},
			apiType: corev3.ApiConfigSource_GRPC, xdsType: clusterv3.Cluster_STATIC, endpoints: 2,
		},
		"a replica by name": {
			edit:    func(c *BootstrapConfig) { c.XDSAddress = "127.0.0.1:18000,xds-2:18000" },
			apiType: corev3.ApiConfigSource_GRPC, xdsType: clusterv3.Cluster_STRICT_DNS, endpoints: 2,
		},
		"xds address, no port": {edit: func(c *BootstrapConfig) { c.XDSAddress = "localhost" }, wantError: "xds address"},
		"TLS to replicas on two hosts, no shared name": {
			edit: func(c *BootstrapConfig) {
				c.XDSAddress, c.TLS = "127.0.0.1:18000,127.0.0.2:18000", &BootstrapTLS{CAFile: "ca.pem"}
			},
			wantError: "--tls-server-name",
		},
		"TLS to replicas on two hosts, a shared name": {
			edit: func(c *BootstrapConfig) {
				c.XDSAddress, c.TLS = "127.0.0.1:18000,127.0.0.2:18000", &BootstrapTLS{CAFile: "ca.pem", ServerName: "xds.internal"}
			},
			apiType: corev3.ApiConfigSource_GRPC, xdsType: clusterv3.Cluster_STATIC, endpoints: 2,
		},
		"second xds address bad": {edit: func(c *BootstrapConfig) { c.XDSAddress = "127.0.0.1:1," }, wantError: "xds address"},
		"xds address, port 0":    {edit: func(c *BootstrapConfig) { c.XDSAddress = "localhost:0" }, wantError: "not in [1, 65535]"},
		"admin on a host name":   {edit: func(c *BootstrapConfig) { c.AdminAddress = "localhost:9901" }, wantError: "must be an IP"},
	} {
		t.Run(name, func(t *testing.T) {
			c := base
			if tc.edit != nil {
				tc.edit(&c)
			}
			b, err := Bootstrap(c)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := b.GetDynamicResources().GetAdsConfig().GetApiType(); got != tc.apiType {
				t.Errorf("api_type = %v, want %v", got, tc.apiType)
			}
			if got := b.GetStaticResources().GetClusters()[0].GetType(); got != tc.xdsType {
				t.Errorf("xds-server cluster type = %v, want %v", got, tc.xdsType)
			}
			if got, want := len(b.GetStaticResources().GetClusters()[0].GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()), max(tc.endpoints, 1); got != want {
				t.Errorf("xds-server cluster has %d endpoints, want %d", got, want)
			}
			// Envoy reports load (LRS) to xds-server over the ADS cluster,
			// with GRPC also for delta xDS (LRS has no delta variant).
			if ls := b.GetClusterManager().GetLoadStatsConfig(); ls.GetApiType() != corev3.ApiConfigSource_GRPC ||
				len(ls.GetGrpcServices()) != 1 || ls.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName() != XDSClusterName {
				t.Errorf("cluster_manager.load_stats_config = %v, want GRPC to cluster %s", ls, XDSClusterName)
			}
			if (b.GetAdmin() == nil) != tc.noAdmin {
				t.Errorf("admin = %v", b.GetAdmin())
			}
			if got := b.GetNode().GetLocality().GetZone(); got != tc.zone {
				t.Errorf("zone = %q, want %q", got, tc.zone)
			}
			y, err := BootstrapYAML(b)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseBootstrapYAML(y)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(back, b) {
				t.Errorf("round trip differs:\n%s", y)
			}
		})
	}
}

func TestParseBootstrapYAMLRejectsUnknownFields(t *testing.T) {
	for name, in := range map[string]string{
		"unknown field":    "node: {id: a, cluster: b, colour: red}\n",
		"invalid resource": "static_resources: {clusters: [{name: ''}]}\n",
		"not YAML":         "node: [\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseBootstrapYAML([]byte(in)); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestGRPCBootstrap(t *testing.T) {
	c := BootstrapConfig{NodeID: "client-1", Cluster: "grpc-clients", XDSAddress: "127.0.0.1:18000",
		Locality: Locality{Zone: "zone-a"}, Datacenter: "dc2"}
	out, err := GRPCBootstrap(c)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	node := got["node"].(map[string]any)
	if node["id"] != "client-1" || node["cluster"] != "grpc-clients" || node["locality"].(map[string]any)["zone"] != "zone-a" ||
		node["metadata"].(map[string]any)["datacenter"] != "dc2" {
		t.Errorf("node = %v", node)
	}
	if _, err := xds.NewXDSResolverWithConfigForTesting(out); err != nil {
		t.Errorf("grpc-go rejects the bootstrap: %v", err)
	}
	for name, edit := range map[string]func(*BootstrapConfig){
		"delta":         func(c *BootstrapConfig) { c.Delta = true },
		"admin address": func(c *BootstrapConfig) { c.AdminAddress = "127.0.0.1:9901" },
		"no node id":    func(c *BootstrapConfig) { c.NodeID = "" },
		"bad address":   func(c *BootstrapConfig) { c.XDSAddress = "nowhere" },
	} {
		bad := c
		edit(&bad)
		if _, err := GRPCBootstrap(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
