package e2e

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-server/xds-server/e2e/harness"
)

// spillEndpoint is an endpoint of service api in the spill test: an
// address only (its load is the model's), in a zone, with a fixed
// capacity (requests/s at utilization 1).
type spillEndpoint struct {
	id, zone string
	port     int
	capacity float64
}

// spillEPs: two endpoints in each of zones a and b, 200 requests/s of
// capacity per zone.
var spillEPs = []spillEndpoint{
	{"api-a1", "a", 31001, 100}, {"api-a2", "a", 31002, 100},
	{"api-b1", "b", 31003, 100}, {"api-b2", "b", 31004, 100},
}

// spillByPort is the endpoint of each port.
func spillByPort(port uint32) (spillEndpoint, bool) {
	i := slices.IndexFunc(spillEPs, func(e spillEndpoint) bool { return e.port == int(port) })
	if i < 0 {
		return spillEndpoint{}, false
	}
	return spillEPs[i], true
}

// spillNode is a raw ADS node in a zone (node.locality.zone) that sends
// rate requests/s to api split as the load assignment it last got. It
// keeps the distinct shapes (claShape) its assignments had.
type spillNode struct {
	id, zone string
	rate     float64 // requests/s; the test goroutine's only
	notify   chan struct{}

	mu        sync.Mutex
	cla       *endpointv3.ClusterLoadAssignment
	shapes    []string  // each shape as it changed
	changedAt time.Time // when the shape last changed
	raw       []byte    // the latest assignment's bytes
	updates   int       // assignments received
	changes   int       // of them with other bytes than the one before
}

// startSpillNode connects node id in zone to srv and waits for its first
// assignment of api.
func startSpillNode(t *testing.T, srv *harness.Server, id, zone string, rate float64) *spillNode {
	t.Helper()
	n := &spillNode{id: id, zone: zone, rate: rate, notify: make(chan struct{}, 1)}
	observeADS(t, srv, harness.ADSConfig{NodeID: id, Cluster: "e2e", Locality: &corev3.Locality{Zone: zone},
		Types: []string{resource.ClusterType, resource.EndpointType}}, n.record)
	timeout := time.After(30 * time.Second)
	for n.shape() == "" {
		select {
		case <-n.notify:
		case <-timeout:
			t.Fatalf("node %s got no assignment of api within 30s", id)
		}
	}
	return n
}

func (n *spillNode) record(u harness.ADSUpdate) {
	a, ok := u.Resources["api"]
	if u.TypeURL != resource.EndpointType || !ok {
		return
	}
	cla := &endpointv3.ClusterLoadAssignment{}
	if err := a.UnmarshalTo(cla); err != nil {
		return
	}
	s := claShape(cla)
	n.mu.Lock()
	n.cla = cla
	n.updates++
	if !bytes.Equal(n.raw, a.GetValue()) {
		n.changes, n.raw = n.changes+1, a.GetValue()
	}
	if len(n.shapes) == 0 || n.shapes[len(n.shapes)-1] != s {
		n.shapes, n.changedAt = append(n.shapes, s), u.At
	}
	n.mu.Unlock()
	select {
	case n.notify <- struct{}{}:
	default:
	}
}

// shape is the shape of the node's latest assignment ("" before one).
func (n *spillNode) shape() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.shapes) == 0 {
		return ""
	}
	return n.shapes[len(n.shapes)-1]
}

// counts is how many assignments the node received, and how many of them
// differed from the one before.
func (n *spillNode) counts() (updates, changes int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.updates, n.changes
}

// history is every shape the node's assignments had, and when the last
// change came.
func (n *spillNode) history() ([]string, time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.shapes), n.changedAt
}

// claShape describes an assignment's priorities, their localities (by
// zone) with their share of the priority's locality weight, and their
// endpoints, but not the weights themselves (which follow the endpoints'
// capacity): "P0 a 0.9474 [api-a1 api-a2]; P0 b 0.0526 [...]; ...".
func claShape(cla *endpointv3.ClusterLoadAssignment) string {
	total := map[uint32]float64{}
	for _, l := range cla.GetEndpoints() {
		total[l.GetPriority()] += float64(max(l.GetLoadBalancingWeight().GetValue(), 1))
	}
	var parts []string
	for _, l := range cla.GetEndpoints() {
		var ids []string
		for _, ep := range l.GetLbEndpoints() {
			e, _ := spillByPort(ep.GetEndpoint().GetAddress().GetSocketAddress().GetPortValue())
			ids = append(ids, e.id)
		}
		slices.Sort(ids)
		share := float64(max(l.GetLoadBalancingWeight().GetValue(), 1)) / total[l.GetPriority()]
		parts = append(parts, fmt.Sprintf("P%d %s %.4f %v", l.GetPriority(), l.GetLocality().GetZone(), share, ids))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// split is the node's rate by endpoint id, as a client follows its latest
// assignment: priority 0 only (every endpoint is healthy), the localities
// by locality weight (0 counts as 1: strict priorities set none), within
// a locality by endpoint weight (0 counts as 1).
func (n *spillNode) split() map[string]float64 {
	n.mu.Lock()
	cla := n.cla
	n.mu.Unlock()
	lw := func(l *endpointv3.LocalityLbEndpoints) float64 {
		return float64(max(l.GetLoadBalancingWeight().GetValue(), 1))
	}
	total := 0.0
	for _, l := range cla.GetEndpoints() {
		if l.GetPriority() == 0 {
			total += lw(l)
		}
	}
	out := map[string]float64{}
	for _, l := range cla.GetEndpoints() {
		if l.GetPriority() != 0 {
			continue
		}
		sum := 0.0
		for _, ep := range l.GetLbEndpoints() {
			sum += float64(max(ep.GetLoadBalancingWeight().GetValue(), 1))
		}
		for _, ep := range l.GetLbEndpoints() {
			e, _ := spillByPort(ep.GetEndpoint().GetAddress().GetSocketAddress().GetPortValue())
			out[e.id] += n.rate * lw(l) / total * float64(max(ep.GetLoadBalancingWeight().GetValue(), 1)) / sum
		}
	}
	return out
}

// localShare is the share of the node's requests its latest assignment
// keeps in its own zone.
func (n *spillNode) localShare() float64 {
	in := 0.0
	for id, q := range n.split() {
		if spillZone(id) == n.zone {
			in += q
		}
	}
	return in / n.rate
}

// spillZone is the zone of endpoint id.
func spillZone(id string) string {
	i := slices.IndexFunc(spillEPs, func(e spillEndpoint) bool { return e.id == id })
	return spillEPs[i].zone
}

// spillIdle is the utilization an endpoint reports without requests.
const spillIdle = 0.02

// zoneFigures is the model's load offered (requests/s) and its ratio to
// the capacity per zone.
type zoneFigures struct{ load, util map[string]float64 }

// spillTick computes each endpoint's load from every node's split, posts
// what it serves and its utilization to srv's /v1/load (an endpoint
// saturates: it serves at most its capacity, at utilization 1; idle, it
// reports spillIdle), and
// returns the zones' figures (load offered, over capacity).
func spillTick(t *testing.T, srv *harness.Server, nodes []*spillNode) zoneFigures {
	t.Helper()
	load := map[string]float64{}
	for _, n := range nodes {
		for id, q := range n.split() {
			load[id] += q
		}
	}
	util, qps := map[string]float64{}, map[string]float64{}
	z := zoneFigures{load: map[string]float64{}, util: map[string]float64{}}
	capacity := map[string]float64{}
	for _, e := range spillEPs {
		util[e.id], qps[e.id] = min(max(load[e.id]/e.capacity, spillIdle), 1), min(load[e.id], e.capacity)
		z.load[e.zone] += load[e.id]
		capacity[e.zone] += e.capacity
	}
	for zone, c := range capacity {
		z.util[zone] = z.load[zone] / c
	}
	postLoadQPS(t, srv, "api", util, qps)
	return z
}

// spillKeep is the keep share /debug/weights shows for zone ("dc1"
// region), and its reason.
func spillKeep(t *testing.T, srv *harness.Server, zone string) (float64, string) {
	t.Helper()
	var tab struct {
		Zones []struct {
			Region, Zone, Reason string
			Keep                 float64
		} `json:"zones"`
	}
	getJSON(t, srv.AdminURL("/debug/weights?service=api"), &tab)
	for _, z := range tab.Zones {
		if z.Zone == zone {
			return z.Keep, z.Reason
		}
	}
	t.Fatalf("/debug/weights?service=api shows no zone %q: %+v", zone, tab.Zones)
	return 0, ""
}
