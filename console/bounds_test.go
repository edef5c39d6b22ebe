package console

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/xds"
)

// TestRequestBounds: a service name over MaxServiceNameBytes or a node id
// over xds.MaxNodeIDBytes is refused with 400 before any lookup, and not
// echoed; names at the bound are looked up as usual.
func TestRequestBounds(t *testing.T) {
	_, _, h := newTestConsole(t, nil)
	longName := strings.Repeat("s", MaxServiceNameBytes+1)
	longNode := strings.Repeat("n", xds.MaxNodeIDBytes+1)
	for path, want := range map[string]int{
		"/ui/api/services/" + longName:                                    http.StatusBadRequest,
		"/ui/api/history/" + longName:                                     http.StatusBadRequest,
		"/ui/services/" + longName:                                        http.StatusBadRequest,
		"/ui/api/services/echo?node=" + longNode:                          http.StatusBadRequest,
		"/ui/api/services/" + longName[1:]:                                http.StatusNotFound,
		"/ui/api/services/echo?node=" + longNode[1:]:                      http.StatusOK,
		"/ui/api/services/echo?node=n1&history=" + strings.Repeat("1", 9): http.StatusOK,
	} {
		body := get(t, h, path, want, nil)
		if want == http.StatusBadRequest && (strings.Contains(body, longName[:64]) || strings.Contains(body, longNode[:64])) {
			t.Errorf("%.60s…: the answer echoes the long input", path)
		}
	}
}

// TestFleetListsNodesOncePerSecond: however many fleet pages poll, the
// node list is read at most once a second.
func TestFleetListsNodesOncePerSecond(t *testing.T) {
	now, listed := t0, 0
	_, _, h := newTestConsole(t, func(c *Config) {
		c.Now = func() time.Time { return now }
		c.Fleet = fakeFleet{listed: &listed, nodes: []xds.Node{{ID: "n1", Cluster: "edge", Streams: 1}}}
	})
	var v FleetView
	for range 5 {
		get(t, h, "/ui/api/fleet", http.StatusOK, &v)
	}
	if listed != 1 || v.Nodes.Connected != 1 || v.Nodes.ByCluster["edge"] != 1 {
		t.Errorf("5 polls in a second: %d node lists, nodes %+v; want 1 list, n1 connected in edge", listed, v.Nodes)
	}
	now = now.Add(time.Second)
	get(t, h, "/ui/api/fleet", http.StatusOK, &v)
	if listed != 2 {
		t.Errorf("a second later: %d node lists, want 2", listed)
	}
}
