package envoye2e

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/xds-server/xds-server/e2e/harness"
	_ "github.com/xds-server/xds-server/envoy" // registers every extension type xds-server sends
)

// sentConfig is /debug/config?node=ID: what xds-server sent the node.
type sentConfig struct {
	Resources map[string]struct {
		Version   string            `json:"version"`
		Versions  map[string]string `json:"versions"`
		Resources []json.RawMessage `json:"resources"`
	} `json:"resources"`
}

// dumped is one resource of Envoy's /config_dump: its version and the
// resource as JSON.
type dumped struct {
	version string
	raw     json.RawMessage
}

// envoyDump is Envoy's dynamic resources by short type name and name.
type envoyDump map[string]map[string]dumped

// readEnvoyDump reads /config_dump?include_eds into envoyDump.
func readEnvoyDump(t *testing.T, e *harness.Envoy) envoyDump {
	t.Helper()
	var doc struct {
		Configs []struct {
			Type            string `json:"@type"`
			DynamicClusters []struct {
				Version string          `json:"version_info"`
				Cluster json.RawMessage `json:"cluster"`
			} `json:"dynamic_active_clusters"`
			DynamicEndpoints []struct {
				Version  string          `json:"version_info"`
				Endpoint json.RawMessage `json:"endpoint_config"`
			} `json:"dynamic_endpoint_configs"`
			DynamicListeners []struct {
				Name   string `json:"name"`
				Active struct {
					Version  string          `json:"version_info"`
					Listener json.RawMessage `json:"listener"`
				} `json:"active_state"`
			} `json:"dynamic_listeners"`
			DynamicRoutes []struct {
				Version string          `json:"version_info"`
				Route   json.RawMessage `json:"route_config"`
			} `json:"dynamic_route_configs"`
		} `json:"configs"`
	}
	if err := json.Unmarshal(e.Admin(t, "/config_dump?include_eds"), &doc); err != nil {
		t.Fatalf("envoy /config_dump: %v", err)
	}
	out := envoyDump{"cluster": {}, "endpoint": {}, "listener": {}, "route": {}}
	add := func(kind, version string, raw json.RawMessage, nameKey string) {
		var n map[string]any
		if err := json.Unmarshal(raw, &n); err != nil {
			t.Fatalf("envoy /config_dump %s: %v", kind, err)
		}
		out[kind][fmt.Sprint(n[nameKey])] = dumped{version: version, raw: raw}
	}
	for _, c := range doc.Configs {
		for _, r := range c.DynamicClusters {
			add("cluster", r.Version, r.Cluster, "name")
		}
		for _, r := range c.DynamicEndpoints {
			add("endpoint", r.Version, r.Endpoint, "cluster_name")
		}
		for _, r := range c.DynamicListeners {
			add("listener", r.Active.Version, r.Active.Listener, "name")
		}
		for _, r := range c.DynamicRoutes {
			add("route", r.Version, r.Route, "name")
		}
	}
	return out
}

// readSent reads /debug/config for node id.
func readSent(t *testing.T, srv *harness.Server, id string) sentConfig {
	t.Helper()
	resp, err := srv.Admin.Get(srv.AdminURL("/debug/config?node=" + url.QueryEscape(id)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/debug/config?node=%s: %s: %s", id, resp.Status, b)
	}
	var c sentConfig
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("/debug/config: %v", err)
	}
	return c
}

// newResource is an empty message of a short type name.
func newResource(kind string) proto.Message {
	switch kind {
	case "cluster":
		return &clusterv3.Cluster{}
	case "endpoint":
		return &endpointv3.ClusterLoadAssignment{}
	case "listener":
		return &listenerv3.Listener{}
	default:
		return &routev3.RouteConfiguration{}
	}
}

// compareConfigDump checks that Envoy holds exactly what xds-server says
// it sent node e: the same resources of every type, each equal as a
// message, at the version it was sent with (state of the world: the
// response's version_info, which Envoy keeps for clusters, listeners and
// routes; delta: each resource's own version). Envoy keeps no version for
// load assignments.
func compareConfigDump(t *testing.T, e *harness.Envoy, srv *harness.Server, delta bool) {
	t.Helper()
	sent := readSent(t, srv, e.NodeID)
	got := readEnvoyDump(t, e)
	// A cluster with its endpoints inline (the generated
	// xds-server-ratelimit) shows them among Envoy's load assignments too.
	for _, raw := range sent.Resources["cluster"].Resources {
		var c struct {
			Name           string          `json:"name"`
			LoadAssignment json.RawMessage `json:"loadAssignment"`
		}
		_ = json.Unmarshal(raw, &c)
		if c.LoadAssignment != nil {
			delete(got["endpoint"], c.Name)
		}
	}
	for _, kind := range []string{"cluster", "endpoint", "listener", "route"} {
		s := sent.Resources[kind]
		want := map[string]json.RawMessage{}
		for _, raw := range s.Resources {
			var n map[string]any
			_ = json.Unmarshal(raw, &n)
			name := n["name"]
			if kind == "endpoint" {
				name = n["clusterName"]
			}
			want[fmt.Sprint(name)] = raw
		}
		if g, w := slices.Sorted(maps.Keys(got[kind])), slices.Sorted(maps.Keys(want)); !slices.Equal(g, w) {
			t.Errorf("%s: Envoy holds %v, xds-server sent %v", kind, g, w)
			continue
		}
		for name, raw := range want {
			d := got[kind][name]
			wantVersion := s.Version
			if delta {
				wantVersion = s.Versions[name]
			}
			if kind != "endpoint" && d.version != wantVersion {
				t.Errorf("%s %s: Envoy holds version %q, xds-server sent %q", kind, name, d.version, wantVersion)
			}
			a, b := newResource(kind), newResource(kind)
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, a); err != nil {
				t.Fatalf("%s %s from /debug/config: %v", kind, name, err)
			}
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(d.raw, b); err != nil {
				t.Fatalf("%s %s from Envoy's /config_dump: %v", kind, name, err)
			}
			envoyDefaults(b)
			envoyDrops(a)
			if !proto.Equal(a, b) {
				t.Errorf("%s %s: Envoy holds\n%s\nxds-server sent\n%s", kind, name, d.raw, raw)
			}
		}
	}
}

// envoyDrops removes from a sent load assignment what Envoy's dump of it,
// rebuilt from its hosts, does not show: the localities' metadata (the
// cluster stamp, envoy.Service.ClusterStamp).
func envoyDrops(m proto.Message) {
	if cla, ok := m.(*endpointv3.ClusterLoadAssignment); ok {
		for _, l := range cla.GetEndpoints() {
			l.Metadata = nil
		}
	}
}

// envoyDefaults undoes what Envoy adds to a load assignment it stores:
// an empty health_check_config on each endpoint, and a policy with its
// default overprovisioning factor (140).
func envoyDefaults(m proto.Message) {
	cla, ok := m.(*endpointv3.ClusterLoadAssignment)
	if !ok {
		return
	}
	if p := cla.GetPolicy(); p.GetOverprovisioningFactor().GetValue() == 140 {
		p.OverprovisioningFactor = nil
		if proto.Size(p) == 0 {
			cla.Policy = nil
		}
	}
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			if hc := e.GetEndpoint().GetHealthCheckConfig(); hc != nil && proto.Size(hc) == 0 {
				e.GetEndpoint().HealthCheckConfig = nil
			}
		}
	}
}
