package envoy

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xds-server/xds-server/internal/toolbin/toolbintest"
)

// TestApplyPolicyRoutesEnvoyValidates: Envoy 1.40 (--mode validate)
// accepts a listener (rate limit and admission control filters) whose
// route configuration, inline, is ApplyPolicyRoutes' result, with the
// EDS clusters it names ("<service>~<subset>" included); and refuses it
// when one of those clusters is missing (Envoy checks a static route
// configuration's clusters), so the check is not vacuous.
func TestApplyPolicyRoutesEnvoyValidates(t *testing.T) {
	if testing.Short() {
		t.Skip("runs envoy --mode validate")
	}
	envoyBin := toolbintest.Envoy(t)
	l := HTTPListener{Name: "ingress", Address: "127.0.0.1:10000", Routes: []Route{
		{Prefix: "/api", Service: "web", Timeout: 5 * time.Second, Retries: 2},
		{Path: "/healthz", Service: "web"},
		{Prefix: "/split", Split: []WeightedCluster{{Cluster: "web~v1", Weight: 9000}, {Cluster: "api", Weight: 1000}}},
		{Prefix: "/", Service: "api"}},
		RateLimit:        &RateLimit{Domain: "edge", Actions: [][]RateLimitAction{{{RemoteAddress: true}}}},
		AdmissionControl: &AdmissionControl{SuccessRateThreshold: 0.5},
	}
	res, err := BuildHTTPListener(l)
	if err != nil {
		t.Fatal(err)
	}
	applied, err := ApplyPolicyRoutes(res.Route, map[string][]PolicyRoute{"web": {
		{Prefix: "/api/v2", PrefixRewrite: "/v2/", Clusters: []WeightedCluster{{Cluster: "web~v2"}},
			Retry: &PolicyRetry{NumRetries: 3, ConnectFailure: true, StatusCodes: []uint32{503}}},
		{Headers: []HeaderMatch{{Name: "x-canary", Exact: "1"}}, QueryParams: []QueryParamMatch{{Name: "debug", Present: true}},
			Methods: []string{"GET", "HEAD"}, Clusters: []WeightedCluster{{Cluster: "web~v2"}}, HashPolicies: []RouteHashPolicy{{Header: "x-user"}}},
		{Regex: "/r/[a-z]+", CaseInsensitive: true, Clusters: []WeightedCluster{{Cluster: "web~v2"}}}, // left out: under /api and /healthz
		{Clusters: []WeightedCluster{{Cluster: "web~v1", Weight: 9000}, {Cluster: "web~v2", Weight: 1000}}, Timeout: time.Second},
	}})
	if err != nil {
		t.Fatal(err)
	}
	names := routeClusters(applied)
	if want := []string{"api", "web~v1", "web~v2"}; !slices.Equal(names, want) {
		t.Fatalf("clusters named %v, want %v", names, want)
	}
	if n := len(applied.GetVirtualHosts()[0].GetRoutes()); n != 7 {
		t.Fatalf("%d routes, want 3 for /api, 2 for /healthz, the split and /", n)
	}
	run := func(clusters []string) ([]byte, error) {
		cfg := filepath.Join(t.TempDir(), "envoy.yaml")
		if err := os.WriteFile(cfg, validateConfig(t, res.Listener, applied, clusters), 0o644); err != nil {
			t.Fatal(err)
		}
		return exec.Command(envoyBin, "--mode", "validate", "-c", cfg, "-l", "error").CombinedOutput()
	}
	if out, err := run(names); err != nil {
		t.Fatalf("envoy --mode validate: %v\n%s", err, out)
	}
	if out, err := run(names[:2]); err == nil || !strings.Contains(string(out), "unknown cluster 'web~v2'") {
		t.Errorf("without the web~v2 cluster: %v\n%s", err, out)
	}
}

// routeClusters are the clusters rc's routes name, sorted, once each.
func routeClusters(rc *routev3.RouteConfiguration) []string {
	var out []string
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			if c := r.GetRoute().GetCluster(); c != "" {
				out = append(out, c)
			}
			for _, w := range r.GetRoute().GetWeightedClusters().GetClusters() {
				out = append(out, w.GetName())
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// validateConfig is a bootstrap with lis (its route configuration
// replaced by rc, inline), the rate-limit cluster, and an EDS cluster
// (over ADS) for each of clusters.
func validateConfig(t *testing.T, lis *listenerv3.Listener, rc *routev3.RouteConfiguration, clusters []string) []byte {
	t.Helper()
	b, err := Bootstrap(BootstrapConfig{NodeID: "validate", Cluster: "validate", XDSAddress: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	lis = proto.CloneOf(lis)
	f := lis.GetFilterChains()[0].GetFilters()[0]
	hcm := &hcmv3.HttpConnectionManager{}
	if err := f.GetTypedConfig().UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	hcm.RouteSpecifier = &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: rc}
	packed, err := marshalAny(hcm)
	if err != nil {
		t.Fatal(err)
	}
	f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: packed}
	rl, err := RateLimitCluster("127.0.0.1:2")
	if err != nil {
		t.Fatal(err)
	}
	cs := []*clusterv3.Cluster{rl}
	for _, name := range clusters {
		c, err := Cluster(Service{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	b.StaticResources.Clusters = append(b.StaticResources.Clusters, cs...)
	b.StaticResources.Listeners = []*listenerv3.Listener{lis}
	y, err := BootstrapYAML(b)
	if err != nil {
		t.Fatal(err)
	}
	return y
}
