package envoye2e

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xds-server/xds-server/e2e/harness"
)

// swSubsetsConfig: service web in subsets of 2 by the algorithm given
// (%s), and a listener (any free port) routing everything to it.
const swSubsetsConfig = `
services:
  web: { subset_size: 2, subsetting: %s }
listeners:
  - name: ingress
    address: 127.0.0.1:0
    routes:
      - { prefix: /, service: web }
`

// swWait bounds every wait on Envoy or xds-server (2 busy cores).
const swWait = 60 * time.Second

// TestEnvoySubsets: six example backends of web, subset_size 2 and three
// Envoys (state of the world and delta) of one cluster, for each
// subsetting algorithm. Each Envoy's EDS (its /clusters) holds exactly the
// subset /debug/subsets and /debug/config name for its node, HTTP traffic
// through its listener reaches those two backends and no other, and the
// Envoys spread over the backends as /debug/subsets counts: with classic
// (one round of 6/2 nodes) each backend is in exactly one subset. A
// restarted Envoy keeps its subset (its client index is sticky).
func TestEnvoySubsets(t *testing.T) {
	skipShort(t)
	consul := harness.Consul(t)
	ids := swStartWebBackends(t, consul, 6) // address -> backend id
	for _, algo := range []string{"steady", "classic"} {
		t.Run(algo, func(t *testing.T) {
			srv := startServer(t, consul, "--config", swWriteConfig(t, fmt.Sprintf(swSubsetsConfig, algo)))
			var envoys []*harness.Envoy
			for i, delta := range []bool{false, true, false} {
				envoys = append(envoys, harness.StartEnvoy(t, harness.EnvoyOptions{
					NodeID: fmt.Sprintf("sw-%s-%d", algo, i), XDSAddr: srv.XDSAddr, Delta: delta}))
			}
			covered := map[string][]string{} // backend id -> nodes whose traffic reached it
			for _, e := range envoys {
				for _, id := range swCheckSubset(t, srv, e, ids) {
					covered[id] = append(covered[id], e.NodeID)
				}
			}
			var rep swSubsetReport
			swGetJSON(t, srv.AdminURL("/debug/subsets?service=web"), &rep)
			for _, ep := range rep.Endpoints {
				if len(covered[ep.ID]) != ep.Connections {
					t.Errorf("backend %s: traffic from %v, /debug/subsets counts %d nodes", ep.ID, covered[ep.ID], ep.Connections)
				}
				if algo == "classic" && len(covered[ep.ID]) != 1 {
					t.Errorf("classic: backend %s reached from %v, want exactly one of the 3 nodes", ep.ID, covered[ep.ID])
				}
			}
			t.Logf("%s: backends reached from %v; /debug/subsets balance %+v", algo, covered, rep.Balance)

			before := swAwaitSubset(t, srv, envoys[1], ids)
			envoys[1].Restart()
			if after := swAwaitSubset(t, srv, envoys[1], ids); !slices.Equal(before, after) {
				t.Errorf("%s restarted: subset %v, before %v (its client index should be sticky)", envoys[1].NodeID, after, before)
			}
			envoys[1].AssertAccepted(t)
		})
	}
}

// swCheckSubset waits for e's subset of web, sends HTTP load through its
// listener until both members answered, checks that no other backend did
// and no request failed, and returns the backends that answered.
func swCheckSubset(t *testing.T, srv *harness.Server, e *harness.Envoy, ids map[string]string) []string {
	t.Helper()
	subset := swAwaitSubset(t, srv, e, ids)
	res := swLoadUntil(t, e, "ingress", "/sub", subset, 20)
	t.Logf("%s (subset %v): %s", e.NodeID, subset, res)
	for id := range res.ByBackend {
		if !slices.Contains(subset, id) {
			t.Errorf("%s: traffic reached %s, outside its subset %v: %s", e.NodeID, id, subset, res)
		}
	}
	if res.Failed() != 0 {
		t.Errorf("%s: %d failed requests: %s", e.NodeID, res.Failed(), res)
	}
	e.AssertAccepted(t)
	return slices.Sorted(maps.Keys(res.ByBackend))
}

// swStartWebBackends starts n example backends of service web, registered
// in Consul with their HTTP port, and returns their ids by HTTP address.
func swStartWebBackends(t *testing.T, consul *harness.ConsulAgent, n int) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for i := range n {
		b := harness.StartExampleBackend(t, "-consul", consul.Addr(), "-service", "web", "-id", fmt.Sprintf("web-%d", i),
			"-register-port", "http", "-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0",
			"-check-interval", "1s", "-drain-delay", "0s")
		ids[b.HTTPAddr] = b.ID
	}
	return ids
}

// swWriteConfig writes an xds-server config file and returns its path.
func swWriteConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "xds-server.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// swSubsetReport is the part of /debug/subsets the tests read.
type swSubsetReport struct {
	Balance struct {
		Min int `json:"min"`
		Max int `json:"max"`
	} `json:"balance"`
	Endpoints []struct {
		ID          string `json:"id"`
		Connections int    `json:"connections"`
	} `json:"endpoints"`
	Nodes []struct {
		ID           string   `json:"id"`
		Index        int      `json:"index"`
		Subset       []string `json:"subset"`
		Replacements []string `json:"replacements"`
		Endpoints    []string `json:"endpoints"`
	} `json:"nodes"`
}

// swAwaitSubset waits until e's /clusters, /debug/subsets and
// /debug/config agree on e's hosts of web: its subset of 2 serving
// backends, no replacements. It returns the subset's ids, sorted.
func swAwaitSubset(t *testing.T, srv *harness.Server, e *harness.Envoy, ids map[string]string) []string {
	t.Helper()
	var subset []string
	e.Await(t, "its subset of web", swWait, func() (bool, string, error) {
		hosts, err := e.Hosts("web")
		if err != nil {
			return false, "", err
		}
		var inEnvoy []string
		for _, h := range hosts {
			inEnvoy = append(inEnvoy, ids[h.Addr]+"@"+h.Health.String())
		}
		slices.Sort(inEnvoy)
		var rep swSubsetReport
		if err := swTryJSON(srv.AdminURL("/debug/subsets?service=web&node="+url.QueryEscape(e.NodeID)), &rep); err != nil {
			return false, fmt.Sprintf("envoy %v; /debug/subsets: %v", inEnvoy, err), nil
		}
		if len(rep.Nodes) != 1 {
			return false, fmt.Sprintf("envoy %v; /debug/subsets has %d nodes", inEnvoy, len(rep.Nodes)), nil
		}
		n := rep.Nodes[0]
		subset = slices.Sorted(slices.Values(n.Subset))
		sent, err := swSentEndpoints(srv, e.NodeID, "web")
		state := fmt.Sprintf("envoy %s; /debug/subsets index %d subset %v replacements %v endpoints %v; /debug/config %v (%v)",
			inEnvoy, n.Index, n.Subset, n.Replacements, n.Endpoints, sent, err)
		var want []string
		for _, id := range subset {
			want = append(want, id+"@HEALTHY")
		}
		ok := len(subset) == 2 && len(n.Replacements) == 0 && slices.Equal(inEnvoy, want) &&
			slices.Equal(n.Endpoints, subset) && slices.Equal(swMapped(sent, ids), subset)
		return ok, state, nil
	})
	return subset
}

// swSentEndpoints is what /debug/config?node= says node was sent for the
// load assignment of cluster: host:port of each endpoint, sorted.
func swSentEndpoints(srv *harness.Server, node, cluster string) ([]string, error) {
	var cfg struct {
		Resources map[string]struct {
			Resources []json.RawMessage `json:"resources"`
		} `json:"resources"`
	}
	if err := swTryJSON(srv.AdminURL("/debug/config?node="+url.QueryEscape(node)), &cfg); err != nil {
		return nil, err
	}
	var out []string
	for _, raw := range cfg.Resources["endpoint"].Resources {
		var cla endpointv3.ClusterLoadAssignment
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, &cla); err != nil {
			return nil, err
		}
		if cla.GetClusterName() != cluster {
			continue
		}
		for _, l := range cla.GetEndpoints() {
			for _, lb := range l.GetLbEndpoints() {
				sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
				out = append(out, net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))))
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// swMapped maps addresses to backend ids (sorted); an unknown address
// stays as it is.
func swMapped(addrs []string, ids map[string]string) []string {
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, cmp.Or(ids[a], a))
	}
	slices.Sort(out)
	return out
}

// swLoadUntil sends HTTP load through e's listener until every backend in
// want has answered at least min requests (or swWait passes), and returns
// what the load got.
func swLoadUntil(t *testing.T, e *harness.Envoy, listener, path string, want []string, min int) harness.LoadResult {
	t.Helper()
	addr := e.AwaitListener(t, listener, swWait)
	l := harness.StartHTTPLoad(harness.HTTPLoadConfig{URL: "http://" + addr + path, Workers: 2})
	defer l.Stop()
	e.Await(t, "traffic to "+strings.Join(want, ", "), swWait, func() (bool, string, error) {
		r := l.Snapshot()
		for _, id := range want {
			if r.ByBackend[id] < min {
				return false, r.String(), nil
			}
		}
		return true, "", nil
	})
	return l.Stop()
}

// swTryJSON GETs u and decodes its JSON body into v.
func swTryJSON(u string, v any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// swGetJSON is swTryJSON failing the test.
func swGetJSON(t *testing.T, u string, v any) {
	t.Helper()
	if err := swTryJSON(u, v); err != nil {
		t.Fatal(err)
	}
}
