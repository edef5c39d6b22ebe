package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/xds-server/xds-server/internal/pause"
)

// EnvoyAdmin reads one real Envoy's admin API. The benchmark watches a
// cluster through its membership_healthy gauge (/stats filtered to the
// gauges of that cluster: about 50 bytes and a fraction of a millisecond
// of Envoy's main thread), which Envoy updates in the same main-thread
// pass that changes the hosts /clusters shows; /clusters itself (about
// 1 MB of JSON at 50 x 20 endpoints, tens of milliseconds) is read once
// per Envoy at the end of a run to check every host's health.
type EnvoyAdmin struct {
	Addr   string // host:port of the admin listener
	client *http.Client
}

// envoyAdminTimeout bounds one admin request.
const envoyAdminTimeout = 10 * time.Second

// NewEnvoyAdmin is the admin API at addr.
func NewEnvoyAdmin(addr string) *EnvoyAdmin {
	return &EnvoyAdmin{Addr: addr, client: &http.Client{Timeout: envoyAdminTimeout}}
}

// Healthy returns the membership_healthy gauge of each cluster by service
// (EnvoyServiceOf): of every cluster with service "", else of the
// clusters of that service only.
func (a *EnvoyAdmin) Healthy(ctx context.Context, service string) (map[string]int, error) {
	filter := `\.membership_healthy$`
	if service != "" {
		filter = `^cluster\.` + regexp.QuoteMeta(service) + `(\..*)?\.membership_healthy$`
	}
	body, err := a.stats(ctx, filter)
	if err != nil {
		return nil, err
	}
	return ParseEnvoyHealthy(bytes.NewReader(body))
}

// Warming is the number of clusters Envoy is still warming (waiting for
// their endpoints).
func (a *EnvoyAdmin) Warming(ctx context.Context) (int, error) {
	body, err := a.stats(ctx, `^cluster_manager\.warming_clusters$`)
	if err != nil {
		return 0, err
	}
	_, v, ok := strings.Cut(strings.TrimSpace(string(body)), ": ")
	n, err := strconv.Atoi(v)
	if !ok || err != nil {
		return 0, fmt.Errorf("bench: envoy %s: warming_clusters: %q", a.Addr, body)
	}
	return n, nil
}

// stats reads the gauges of /stats whose names match the regular
// expression filter.
func (a *EnvoyAdmin) stats(ctx context.Context, filter string) ([]byte, error) {
	u := "http://" + a.Addr + "/stats?type=Gauges&filter=" + url.QueryEscape(filter)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("bench: envoy %s: %w", a.Addr, err)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bench: envoy %s: %w", a.Addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("bench: envoy %s: %w", a.Addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench: envoy %s /stats: %s: %.200s", a.Addr, resp.Status, body)
	}
	return body, nil
}

// ParseEnvoyHealthy parses Envoy's /stats text ("name: value" lines) into
// the membership_healthy gauges by service; other lines are skipped. Two
// clusters of one service are an error.
func ParseEnvoyHealthy(r io.Reader) (map[string]int, error) {
	out := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), ": ")
		cluster, isGauge := strings.CutSuffix(strings.TrimPrefix(name, "cluster."), ".membership_healthy")
		if !ok || !isGauge || !strings.HasPrefix(name, "cluster.") {
			continue
		}
		n, err := strconv.Atoi(value)
		if err != nil {
			return nil, fmt.Errorf("bench: envoy stat %q: %w", sc.Text(), err)
		}
		svc := EnvoyServiceOf(cluster)
		if _, dup := out[svc]; dup {
			return nil, fmt.Errorf("bench: envoy has two clusters of service %q (the second: %s)", svc, cluster)
		}
		out[svc] = n
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench: envoy stats: %w", err)
	}
	return out, nil
}

// EnvoyServiceOf is the service an Envoy cluster name stands for: the name
// itself for xds-server ("bench-svc-007"), its first label for Consul
// ("bench-svc-007.default.dc1.internal.<trust domain>.consul").
func EnvoyServiceOf(cluster string) string {
	svc, _, _ := strings.Cut(cluster, ".")
	return svc
}

// AwaitEnvoysHealthy polls every Envoy's gauge of service every poll, all
// Envoys at once, until each shows want healthy hosts, and returns each
// Envoy's latency from start (in the order of admins). It fails after
// timeout with how many Envoys did not get there and what they showed.
func AwaitEnvoysHealthy(ctx context.Context, admins []*EnvoyAdmin, service string, want int,
	start time.Time, poll, timeout time.Duration) ([]time.Duration, error) {
	ctx, cancel := context.WithDeadline(ctx, start.Add(timeout))
	defer cancel()
	lat := make([]time.Duration, len(admins))
	last := make([]string, len(admins))
	var wg sync.WaitGroup
	for i, a := range admins {
		wg.Go(func() {
			for {
				m, err := a.Healthy(ctx, service)
				now := time.Now()
				switch {
				case err == nil && m[service] == want:
					lat[i] = now.Sub(start)
					return
				case err == nil:
					last[i] = fmt.Sprintf("%d healthy", m[service])
				default:
					last[i] = err.Error()
				}
				if !pause.For(ctx, poll) {
					return
				}
			}
		})
	}
	wg.Wait()
	var missing []string
	for i, d := range lat {
		if d == 0 {
			missing = append(missing, fmt.Sprintf("%s: %s", admins[i].Addr, last[i]))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("bench: %d of %d Envoys do not show %d healthy hosts of %s within %v: %s",
			len(missing), len(admins), want, service, timeout, strings.Join(missing[:min(len(missing), 5)], "; "))
	}
	return lat, nil
}

// AwaitEnvoysSynced polls every Envoy every poll until each shows every
// endpoint of every service of cat healthy, or fails after timeout.
func AwaitEnvoysSynced(ctx context.Context, admins []*EnvoyAdmin, cat Catalog, poll, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	errs := make([]error, len(admins))
	var wg sync.WaitGroup
	for i, a := range admins {
		wg.Go(func() {
			for {
				m, err := a.Healthy(ctx, "")
				if err == nil {
					err = catalogShown(m, cat)
				}
				if err == nil {
					var n int
					if n, err = a.Warming(ctx); err == nil && n > 0 {
						err = fmt.Errorf("%d clusters warming", n)
					}
				}
				if errs[i] = err; err == nil {
					return
				}
				if !pause.For(ctx, poll) {
					return
				}
			}
		})
	}
	wg.Wait()
	var bad []error
	for i, err := range errs {
		if err != nil {
			bad = append(bad, fmt.Errorf("envoy %s: %w", admins[i].Addr, err))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("bench: %d of %d Envoys not synced within %v: %w", len(bad), len(admins), timeout, errors.Join(bad[:min(len(bad), 3)]...))
	}
	return nil
}

// catalogShown reports the first service of cat whose healthy host count
// in m is not every endpoint.
func catalogShown(m map[string]int, cat Catalog) error {
	for s := range cat.Services {
		if got, ok := m[cat.Service(s)]; !ok || got != cat.Endpoints {
			return fmt.Errorf("%s: %d healthy hosts (cluster present: %v), want %d", cat.Service(s), got, ok, cat.Endpoints)
		}
	}
	return nil
}

// CheckEnvoyHosts checks an Envoy's /clusters against the catalog: every
// service has a cluster (EnvoyServiceOf) holding every endpoint's address,
// whatever the port (Consul's clusters hold the sidecars' ports), whose
// EDS health is UNHEALTHY if unhealthy(s, e) and HEALTHY otherwise.
func CheckEnvoyHosts(c *adminv3.Clusters, cat Catalog, unhealthy func(s, e int) bool) error {
	hosts := map[string]map[string]corev3.HealthStatus{} // service -> IP -> EDS health
	for _, cs := range c.GetClusterStatuses() {
		ips := map[string]corev3.HealthStatus{}
		for _, h := range cs.GetHostStatuses() {
			ips[h.GetAddress().GetSocketAddress().GetAddress()] = h.GetHealthStatus().GetEdsHealthStatus()
		}
		hosts[EnvoyServiceOf(cs.GetName())] = ips
	}
	var bad []string
	for s := range cat.Services {
		ips, ok := hosts[cat.Service(s)]
		if !ok {
			bad = append(bad, cat.Service(s)+": no cluster")
			continue
		}
		for e := range cat.Endpoints {
			ip, _, _ := net.SplitHostPort(cat.Key(s, e).Addr)
			want := corev3.HealthStatus_HEALTHY
			if unhealthy(s, e) {
				want = corev3.HealthStatus_UNHEALTHY
			}
			if got, ok := ips[ip]; !ok || got != want {
				bad = append(bad, fmt.Sprintf("%s %s: %v (present: %v), want %v", cat.Service(s), ip, got, ok, want))
			}
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Errorf("bench: /clusters: %d hosts not as in Consul: %s", len(bad), strings.Join(bad[:min(len(bad), 5)], "; "))
	}
	return nil
}

// EnvoySaid is what the Envoys logged at warning level or above, or about
// a rejected config, one entry per distinct message (timestamp, thread id
// and source location cut; a deprecation cut after the option's name),
// with how many of the Envoys said it; the connection-limit warning every
// Envoy prints is left out.
func EnvoySaid(logs []string) []string {
	count := map[string]int{}
	for _, log := range logs {
		seen := map[string]bool{}
		for line := range strings.Lines(log) {
			if msg, ok := envoyComplaint(strings.TrimSpace(line)); ok && !seen[msg] {
				seen[msg] = true
				count[msg]++
			}
		}
	}
	out := make([]string, 0, len(count))
	for msg, n := range count {
		out = append(out, fmt.Sprintf("%s (%d of %d Envoys)", msg, n, len(logs)))
	}
	slices.Sort(out)
	return out
}

// envoyComplaint normalizes one log line of Envoy's default format
// ("[time][thread][level][logger] [file:line] message") if it is a
// complaint.
func envoyComplaint(line string) (string, bool) {
	rest := line
	for range 2 { // time, thread
		_, after, ok := strings.Cut(rest, "]")
		if !ok || !strings.HasPrefix(rest, "[") {
			return "", false
		}
		rest = after
	}
	level, _, _ := strings.Cut(strings.TrimPrefix(rest, "["), "]")
	bad := level == "warning" || level == "error" || level == "critical" || strings.Contains(rest, "rejected")
	if !bad || strings.Contains(rest, "no configured limit to the number of allowed active downstream connections") {
		return "", false
	}
	if i := strings.Index(rest, "] ["); i >= 0 { // drop "[file:line] "
		if j := strings.Index(rest[i+3:], "] "); j >= 0 {
			rest = rest[:i+2] + rest[i+3+j+2:]
		}
	}
	if i := strings.Index(rest, ". This configuration will be removed"); i >= 0 {
		rest = rest[:i]
	}
	return rest, true
}
