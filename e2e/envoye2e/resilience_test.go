package envoye2e

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/e2e/harness"
)

// ldHold is how long the load runs with the control plane killed.
const ldHold = 10 * time.Second

// TestEnvoyResilience: a state-of-the-world and a delta Envoy route a
// steady load through a listener of xds-server when xds-server is killed
// (SIGKILL): 10 s later no request has failed. Then Envoy reconnects,
// either to a new xds-server on the same address or to a second replica
// (ha.enabled) named in its bootstrap, and is sent nothing it already has:
// none of its update_success counters moves, and the new server counts no
// push; an admin drain and undrain through the new server then reach
// Envoy as exactly two load assignments. No request fails throughout.
func TestEnvoyResilience(t *testing.T) {
	skipShort(t)
	for _, replica := range []bool{false, true} {
		t.Run(map[bool]string{false: "restart on the same address", true: "second replica in the bootstrap"}[replica],
			func(t *testing.T) { ldResilience(t, replica) })
	}
}

func ldResilience(t *testing.T, replica bool) {
	consul := harness.Consul(t)
	web1 := ldStartBackend(t, consul, "web-1", "127.0.0.1:0", "127.0.0.1:0")
	ldStartBackend(t, consul, "web-2", "127.0.0.1:0", "127.0.0.1:0")
	flags := []string{"--config", ldWriteConfig(t, "")}
	if replica {
		flags = append(flags, "--ha.enabled", "--ha.consul.prefix", "ld-resilience/", "--subsetting.index_source", "consul")
	}
	a := startServerWith(t, consul, ldXDSAt(""), flags...)
	xdsAddr, bAddr := a.XDSAddr, a.XDSAddr
	if replica {
		// b's address is in the bootstrap before b runs: Envoy finds
		// only a at first, and b is there when a dies.
		bAddr = fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
		xdsAddr += "," + bAddr
	}
	envoys := ldStartEnvoys(t, xdsAddr, 2)
	for _, le := range envoys {
		ldAwaitNode(t, le.e, a)
	}
	var b *harness.Server
	if replica {
		b = startServerWith(t, consul, ldXDSAt(bAddr), flags...)
	}

	a.Kill(t)
	killed := time.Now()
	base := make([]map[string]int64, len(envoys))
	for i, le := range envoys {
		if !replica {
			ldAwaitConnected(t, le.e, 0)
		}
		base[i] = ldUpdates(t, le.e)
	}
	ldHoldLoad(t, envoys, ldHold)
	if !replica {
		b = startServerWith(t, consul, ldXDSAt(a.XDSAddr), flags...)
	}
	for i, le := range envoys {
		ldAwaitConnected(t, le.e, 1)
		ldAwaitNode(t, le.e, b)
		ldAssertUpdates(t, le, base[i], nil, "after the reconnect")
	}
	t.Logf("both Envoys on the new server %v after the kill", time.Since(killed).Round(time.Millisecond))
	if p := ldPushes(t, b); len(p) > 0 {
		t.Errorf("the new server pushed %v to Envoys that had everything", p)
	}

	ldDrainUndrain(t, b, envoys, base, web1)
	ldStopLoads(t, envoys)
}

// ldDrainUndrain drains web1 through srv and undrains it: the streams are
// live, and a load assignment each time is all that an Envoy is sent.
func ldDrainUndrain(t *testing.T, srv *harness.Server, envoys []ldEnvoy, base []map[string]int64, web1 *harness.ExBackend) {
	t.Helper()
	ldAdmin(t, srv, http.MethodPost, "/v1/drain", `{"service": "web", "endpoint": "web-1"}`)
	ldAwaitDrained(t, envoys, web1.HTTPAddr)
	ldAdmin(t, srv, http.MethodDelete, "/v1/drain?service=web&endpoint=web-1", "")
	for i, le := range envoys {
		le.e.AwaitHosts(t, "web", ldWait, func(h []harness.EnvoyHost) bool { return ldAllHealthy(h, "") })
		ldAssertUpdates(t, le, base[i], map[string]int64{"cluster.web.update_success": 2}, "after a drain and an undrain")
	}
	if p, want := ldPushes(t, srv), map[string]int64{"endpoint": int64(2 * len(envoys))}; !maps.Equal(p, want) {
		t.Errorf("the new server pushed %v for a drain and an undrain to %d Envoys, want %v", p, len(envoys), want)
	}
}

// ldXDSAt has the harness start xds-server's ADS listener on addr, or on
// a free port it picks when addr is "" (again on another when it was
// taken meanwhile).
func ldXDSAt(addr string) harness.ServerOptions {
	return harness.ServerOptions{PortArgs: func(free string) []string {
		if addr == "" {
			addr = free
		}
		return []string{"--xds.address", addr}
	}}
}

// ldAwaitConnected waits until Envoy's control_plane.connected_state is
// want (1: its ADS stream is up).
func ldAwaitConnected(t *testing.T, e *harness.Envoy, want int64) {
	t.Helper()
	e.Await(t, fmt.Sprintf("control_plane.connected_state %d", want), 60*time.Second, func() (bool, string, error) {
		s, err := e.Stats()
		v := s["control_plane.connected_state"]
		return v == want, fmt.Sprintf("connected_state %d", v), err
	})
}

// ldUpdates are Envoy's xDS update counters: every *.update_success
// (cds, lds, each cluster's EDS, each RDS) and *.update_rejected.
func ldUpdates(t *testing.T, e *harness.Envoy) map[string]int64 {
	t.Helper()
	s, err := e.Stats()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for name, v := range s {
		if strings.HasSuffix(name, ".update_success") || strings.HasSuffix(name, ".update_rejected") {
			out[name] = v
		}
	}
	return out
}

// ldAssertUpdates checks that Envoy's update counters moved from base by
// exactly grew (every other one not at all).
func ldAssertUpdates(t *testing.T, le ldEnvoy, base, grew map[string]int64, when string) {
	t.Helper()
	now := ldUpdates(t, le.e)
	var bad []string
	for _, name := range slices.Sorted(maps.Keys(now)) {
		if d := now[name] - base[name]; d != grew[name] {
			bad = append(bad, fmt.Sprintf("%s: %d -> %d (want +%d)", name, base[name], now[name], grew[name]))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%s Envoy %s: its xDS updates moved:\n  %s\nEnvoy said:\n%s", le.mode, when, strings.Join(bad, "\n  "),
			strings.Join(le.e.Complaints(), "\n"))
	}
}

// ldHoldLoad lets the load run for d, failing the test at the first
// failed request; it checks that requests went on meanwhile and that
// every host of web is still HEALTHY.
func ldHoldLoad(t *testing.T, envoys []ldEnvoy, d time.Duration) {
	t.Helper()
	before := make([]int, len(envoys))
	for i, le := range envoys {
		before[i] = le.load.Snapshot().Total
	}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, le := range envoys {
			if r := le.load.Snapshot(); r.Failed() > 0 {
				t.Fatalf("%s Envoy, xds-server a killed: %s", le.mode, r)
			}
		}
	}
	for i, le := range envoys {
		n := le.load.Snapshot().Total - before[i]
		t.Logf("%s Envoy: %d requests in %v after the kill of xds-server a, none failed", le.mode, n, d)
		if n < 50 {
			t.Errorf("%s Envoy: only %d requests in %v", le.mode, n, d)
		}
		// With ha, a's alive check is critical by now: it is a's, not web's.
		if h, err := le.e.Hosts("web"); err != nil || !ldAllHealthy(h, "") {
			t.Errorf("%s Envoy, %v after the kill: hosts of web %s, want all HEALTHY (err %v)", le.mode, d,
				harness.DescribeHosts(h), err)
		}
	}
}

// ldAwaitNode waits until srv's /debug/nodes shows Envoy's node with an
// open stream and, for a state-of-the-world node, the version it holds of
// each of the four types (so srv has read its requests of every type).
func ldAwaitNode(t *testing.T, e *harness.Envoy, srv *harness.Server) {
	t.Helper()
	e.Await(t, "node on "+srv.XDSAddr, ldWait, func() (bool, string, error) {
		var out struct {
			Nodes []struct {
				ID       string            `json:"id"`
				Streams  int               `json:"streams"`
				Versions map[string]string `json:"acked_versions"`
			} `json:"nodes"`
		}
		if err := ldGetJSON(srv, "/debug/nodes", &out); err != nil {
			return false, "", err
		}
		for _, n := range out.Nodes {
			if n.ID == e.NodeID {
				ok := n.Streams > 0 && (strings.Contains(e.NodeID, "delta") || len(n.Versions) == 4)
				return ok, fmt.Sprintf("streams %d, acked %v", n.Streams, n.Versions), nil
			}
		}
		return false, "not known", nil
	})
}

// ldGetJSON decodes an admin path of srv.
func ldGetJSON(srv *harness.Server, path string, v any) error {
	resp, err := srv.Admin.Get(srv.AdminURL(path))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// ldPushes is srv's xds_pushes_total by type, without zeros.
func ldPushes(t *testing.T, srv *harness.Server) map[string]int64 {
	t.Helper()
	resp, err := srv.Admin.Get(srv.AdminURL("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, `xds_pushes_total{type="`)
		if !ok {
			continue
		}
		typ, val, _ := strings.Cut(rest, `"} `)
		if n, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil && n != 0 {
			out[typ] = int64(n)
		}
	}
	return out
}
