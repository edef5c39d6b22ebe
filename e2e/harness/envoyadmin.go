package harness

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// get reads an admin path.
func (e *Envoy) get(path string) ([]byte, error) {
	select {
	case <-e.exited:
		return nil, errEnvoyExited
	default:
	}
	resp, err := e.admin.Get(e.AdminURL(path))
	if err != nil {
		return nil, fmt.Errorf("harness: envoy %s%s: %w", e.NodeID, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("harness: envoy %s%s: %w", e.NodeID, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("harness: envoy %s%s: %s: %s", e.NodeID, path, resp.Status, b)
	}
	return b, nil
}

// Admin reads an admin path or fails the test.
func (e *Envoy) Admin(t testing.TB, path string) []byte {
	t.Helper()
	b, err := e.get(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Stats are Envoy's counters and gauges by name (from /stats; histograms
// left out).
func (e *Envoy) Stats() (map[string]int64, error) {
	b, err := e.get("/stats")
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for line := range strings.Lines(string(b)) {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[name] = n
		}
	}
	return out, nil
}

// Stat is one counter or gauge (0 when Envoy has none of that name).
func (e *Envoy) Stat(t testing.TB, name string) int64 {
	t.Helper()
	s, err := e.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return s[name]
}

// Clusters is Envoy's /clusters?format=json.
func (e *Envoy) Clusters() (*adminv3.Clusters, error) {
	b, err := e.get("/clusters?format=json")
	if err != nil {
		return nil, err
	}
	var c adminv3.Clusters
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("harness: envoy /clusters: %w", err)
	}
	return &c, nil
}

// EnvoyHost is one host of a cluster as Envoy sees it.
type EnvoyHost struct {
	Addr     string // host:port
	Health   corev3.HealthStatus
	Weight   uint32
	Priority uint32
	Zone     string
	Stats    map[string]uint64 // rq_total, rq_success, cx_active, ...
	// Failed: Envoy's own health checks or outlier detection failed it.
	Failed bool
}

// Hosts is the hosts of one cluster (nil when Envoy has no such cluster),
// sorted by address.
func (e *Envoy) Hosts(cluster string) ([]EnvoyHost, error) {
	c, err := e.Clusters()
	if err != nil {
		return nil, err
	}
	for _, cs := range c.GetClusterStatuses() {
		if cs.GetName() != cluster {
			continue
		}
		hosts := []EnvoyHost{}
		for _, h := range cs.GetHostStatuses() {
			sa := h.GetAddress().GetSocketAddress()
			eh := EnvoyHost{
				Addr:   net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))),
				Health: h.GetHealthStatus().GetEdsHealthStatus(), Weight: h.GetWeight(), Priority: h.GetPriority(),
				Zone: h.GetLocality().GetZone(), Stats: map[string]uint64{},
			}
			hs := h.GetHealthStatus()
			eh.Failed = hs.GetFailedActiveHealthCheck() || hs.GetFailedOutlierCheck() || hs.GetFailedActiveDegradedCheck()
			for _, s := range h.GetStats() {
				eh.Stats[s.GetName()] = s.GetValue()
			}
			hosts = append(hosts, eh)
		}
		slices.SortFunc(hosts, func(a, b EnvoyHost) int { return strings.Compare(a.Addr, b.Addr) })
		return hosts, nil
	}
	return nil, nil
}

// ListenerAddr is the address Envoy's listener name is bound to (its
// real port, also when it was configured with port 0), or "" when Envoy
// has no such listener.
func (e *Envoy) ListenerAddr(name string) (string, error) {
	b, err := e.get("/listeners?format=json")
	if err != nil {
		return "", err
	}
	var ls adminv3.Listeners
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &ls); err != nil {
		return "", fmt.Errorf("harness: envoy /listeners: %w", err)
	}
	for _, l := range ls.GetListenerStatuses() {
		if l.GetName() == name {
			sa := l.GetLocalAddress().GetSocketAddress()
			return net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))), nil
		}
	}
	return "", nil
}

// AwaitListener waits until Envoy's listener name accepts connections
// (/listeners names it a moment before) and returns its address.
func (e *Envoy) AwaitListener(t testing.TB, name string, limit time.Duration) string {
	t.Helper()
	var addr string
	e.Await(t, "listener "+name, limit, func() (bool, string, error) {
		a, err := e.ListenerAddr(name)
		if err != nil || a == "" {
			return false, "no listener " + name, err
		}
		addr = a
		c, err := net.DialTimeout("tcp", a, time.Second)
		if err != nil {
			return false, "listener " + name + " at " + a + " does not accept: " + err.Error(), nil
		}
		c.Close()
		return true, "", nil
	})
	return addr
}

// Await polls cond (Envoy is another process: there is no event to wait
// for) every 25 ms until it holds, failing the test after limit with what
// cond last said and Envoy's complaints. An error from cond ends the wait
// only when Envoy has exited.
func (e *Envoy) Await(t testing.TB, what string, limit time.Duration, cond func() (ok bool, state string, err error)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var state string
	var last error
	for {
		ok, s, err := cond()
		if err == nil && ok {
			return
		}
		state, last = s, err
		select {
		case <-e.exited:
			t.Fatalf("envoy %s exited while waiting for %s: %v\nlog tail:\n%s", e.NodeID, what, e.err, e.LogTail(60))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("envoy %s: no %s within %v: %s (last error: %v)\nEnvoy complained:\n%s",
				e.NodeID, what, limit, state, last, strings.Join(e.Complaints(), "\n"))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// AwaitHosts waits until cluster's hosts satisfy cond and returns them.
func (e *Envoy) AwaitHosts(t testing.TB, cluster string, limit time.Duration, cond func([]EnvoyHost) bool) []EnvoyHost {
	t.Helper()
	var hosts []EnvoyHost
	e.Await(t, "hosts of "+cluster, limit, func() (bool, string, error) {
		h, err := e.Hosts(cluster)
		hosts = h
		return err == nil && h != nil && cond(h), fmt.Sprintf("hosts of %s: %s", cluster, DescribeHosts(h)), err
	})
	return hosts
}

// DescribeHosts is a one-line view of hosts for messages.
func DescribeHosts(hosts []EnvoyHost) string {
	if hosts == nil {
		return "(no such cluster)"
	}
	parts := make([]string, 0, len(hosts))
	for _, h := range hosts {
		parts = append(parts, fmt.Sprintf("%s %v w=%d p=%d", h.Addr, h.Health, h.Weight, h.Priority))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Rejections are what Envoy counted against the config it was sent: every
// update_rejected stat that is not 0, every warming cluster or listener,
// and connected_state when it is not 1. Empty when Envoy accepted all.
func (e *Envoy) Rejections() ([]string, error) {
	stats, err := e.Stats()
	if err != nil {
		return nil, err
	}
	var bad []string
	for name, v := range stats {
		if strings.HasSuffix(name, ".update_rejected") && v != 0 {
			bad = append(bad, fmt.Sprintf("%s: %d", name, v))
		}
	}
	for _, name := range []string{"cluster_manager.warming_clusters", "listener_manager.total_listeners_warming"} {
		if stats[name] != 0 {
			bad = append(bad, fmt.Sprintf("%s: %d", name, stats[name]))
		}
	}
	if v := stats["control_plane.connected_state"]; v != 1 {
		bad = append(bad, fmt.Sprintf("control_plane.connected_state: %d", v))
	}
	slices.Sort(bad)
	return bad, nil
}

// AssertAccepted fails the test, with the stats and what Envoy logged,
// when Envoy rejected anything it was sent, still warms a cluster or a
// listener, or is not connected to its control plane.
func (e *Envoy) AssertAccepted(t testing.TB) {
	t.Helper()
	bad, err := e.Rejections()
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("envoy %s did not accept its config:\n  %s\nEnvoy said:\n%s", e.NodeID, strings.Join(bad, "\n  "),
			strings.Join(e.Complaints(), "\n"))
	}
}
