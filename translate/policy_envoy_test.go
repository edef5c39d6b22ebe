package translate_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/xds-server/xds-server/internal/toolbin/toolbintest"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/translate/translatetest"
)

// TestPolicyEnvoyValidates: Envoy (--mode validate) accepts what every
// policy golden case that translates produces: its clusters (names with
// SubsetSep included), and its RouteConfiguration inline in an HTTP
// listener, with every cluster a route names defined (the external ones
// as plain EDS clusters).
func TestPolicyEnvoyValidates(t *testing.T) {
	if testing.Short() {
		t.Skip("runs envoy --mode validate")
	}
	envoyBin := toolbintest.Envoy(t)
	ins, err := filepath.Glob("testdata/policy/*.in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range ins {
		in, _, err := translatetest.LoadPolicy(path)
		if err != nil {
			t.Fatal(err)
		}
		res, err := translate.PolicyService(in.Service, in.Settings, in.Policy, in.Demanded)
		if err != nil {
			continue // an error case
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "envoy.json")
			if err := os.WriteFile(cfg, validateBootstrap(t, res), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(envoyBin, "--mode", "validate", "-c", cfg, "-l", "error").CombinedOutput()
			if err != nil {
				t.Fatalf("envoy --mode validate: %v\n%s", err, out)
			}
		})
	}
}

// validateBootstrap is a bootstrap holding res: ADS (an unreachable
// static cluster) for the EDS clusters, and a listener with res.Route.
func validateBootstrap(t *testing.T, res translate.PolicyResources) []byte {
	t.Helper()
	raw := func(m proto.Message) json.RawMessage {
		b, err := protojson.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	addr := map[string]any{"socket_address": map[string]any{"address": "127.0.0.1", "port_value": 1}}
	clusters := []any{map[string]any{"name": "xds", "type": "STATIC",
		"load_assignment": map[string]any{"cluster_name": "xds", "endpoints": []any{
			map[string]any{"lb_endpoints": []any{map[string]any{"endpoint": map[string]any{"address": addr}}}}}},
		"typed_extension_protocol_options": map[string]any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": map[string]any{
			"@type":                "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
			"explicit_http_config": map[string]any{"http2_protocol_options": map[string]any{}}}}}}
	for _, c := range res.Clusters {
		clusters = append(clusters, raw(c))
	}
	for _, x := range res.External {
		clusters = append(clusters, map[string]any{"name": x.Cluster(), "type": "EDS",
			"eds_cluster_config": map[string]any{"eds_config": map[string]any{"ads": map[string]any{}, "resource_api_version": "V3"}}})
	}
	hcm := map[string]any{"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
		"stat_prefix": "policy", "route_config": raw(res.Route),
		"http_filters": []any{map[string]any{"name": "envoy.filters.http.router",
			"typed_config": map[string]any{"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}}}
	b, err := json.Marshal(map[string]any{
		"node": map[string]any{"id": "validate", "cluster": "validate"},
		"dynamic_resources": map[string]any{"ads_config": map[string]any{"api_type": "GRPC", "transport_api_version": "V3",
			"grpc_services": []any{map[string]any{"envoy_grpc": map[string]any{"cluster_name": "xds"}}}}},
		"static_resources": map[string]any{"clusters": clusters, "listeners": []any{map[string]any{"name": "policy", "address": addr,
			"filter_chains": []any{map[string]any{"filters": []any{map[string]any{
				"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}}}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
