package weights

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	lrsv3 "github.com/envoyproxy/go-control-plane/envoy/service/load_stats/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Named LRS metrics read as the utilization of a Report, in [0,
// MaxUtilization] (mean per request); out of range they stay named only.
const (
	lrsCPUMetric = "cpu_utilization"
	lrsAppMetric = "application_utilization"
)

// lrsKey identifies one endpoint of one service.
type lrsKey struct{ service, endpoint string }

// lrsLoad is the load of one endpoint summed over a request (an endpoint
// may appear in several localities, or under several addresses).
type lrsLoad struct {
	qps, eps float64               // requests/s and errors/s
	named    map[string]*lrsMetric // by metric name
}

// lrsMetric sums one named metric over requests.
type lrsMetric struct {
	total float64 // sum of the metric's values
	n     uint64  // requests that reported it; > 0
}

// lrsSplit says how node spreads its requests to cluster over the
// endpoints it is given: their ids and shares (>= 0, summing to 1); ok
// false when it is not known. See LRSConfig.Split.
type lrsSplit func(node, cluster string) (ids []string, shares []float64, ok bool)

// lrsReports converts the load of one LRS request from node, received at
// now and elapsed after the stream's previous request, into one Report per
// endpoint, sorted by service and endpoint. A locality's load without
// endpoint stats (grpc-go sends no others) is spread over the node's
// endpoints by split (nil: skipped). skipped counts the endpoint (and
// locality-only) loads that did not become a report, by reason.
func lrsReports(node string, req *lrsv3.LoadStatsRequest, now time.Time, elapsed time.Duration,
	resolve func(cluster, address string, port uint32) (string, bool), split lrsSplit) (reports []Report, skipped map[string]int) {
	skipped = map[string]int{}
	loads := map[lrsKey]*lrsLoad{}
	for _, cs := range req.GetClusterStats() {
		cluster := cs.GetClusterName()
		service := ClusterService(cluster)
		secs := lrsSeconds(cs.GetLoadReportInterval(), elapsed)
		var whole lrsLoad // of the localities without endpoint stats
		localities := 0
		for _, loc := range cs.GetUpstreamLocalityStats() {
			eps := loc.GetUpstreamEndpointStats()
			if len(eps) == 0 {
				if loc.GetTotalSuccessfulRequests()+loc.GetTotalErrorRequests()+loc.GetTotalIssuedRequests() > 0 {
					localities++
					whole.addCounts(loc.GetTotalSuccessfulRequests(), loc.GetTotalErrorRequests(), secs)
				}
				continue
			}
			for _, ep := range eps {
				id, reason := lrsResolve(service, secs, ep, resolve)
				if reason != "" {
					skipped[reason]++
					continue
				}
				k := lrsKey{service, id}
				l := loads[k]
				if l == nil {
					l = &lrsLoad{named: map[string]*lrsMetric{}}
					loads[k] = l
				}
				l.add(ep, secs)
			}
		}
		if localities > 0 && !spreadLoad(loads, whole, node, cluster, secs, split) {
			skipped[skipLocalityOnly] += localities
		}
	}
	keys := make([]lrsKey, 0, len(loads))
	for k := range loads {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b lrsKey) int {
		return cmp.Or(cmp.Compare(a.service, b.service), cmp.Compare(a.endpoint, b.endpoint))
	})
	reports = make([]Report, 0, len(keys))
	for _, k := range keys {
		reports = append(reports, loads[k].report(k, node, now))
	}
	return reports, skipped
}

// ClusterService is the service of a cluster: the cluster's name, or for
// the cluster of a traffic policy's target, "<service>~<subset>" or
// "<service>[~<subset>]@<datacenter>" (translate.SubsetSep and
// DatacenterSep), the part before the first "~" or "@": its endpoints'
// loads are the service's, by endpoint.
func ClusterService(cluster string) string {
	if i := strings.IndexAny(cluster, "~@"); i >= 0 {
		return cluster[:i]
	}
	return cluster
}

// lrsSeconds is the length in seconds of the period a ClusterStats covers:
// its load_report_interval, else the time since the stream's previous
// request; 0 when neither is known.
func lrsSeconds(interval *durationpb.Duration, elapsed time.Duration) float64 {
	if interval.CheckValid() == nil {
		if d := interval.AsDuration(); d > 0 {
			return d.Seconds()
		}
	}
	return max(elapsed.Seconds(), 0)
}

// lrsResolve returns the endpoint ID of ep in service, or the reason to
// skip it.
func lrsResolve(service string, secs float64, ep *endpointv3.UpstreamEndpointStats,
	resolve func(cluster, address string, port uint32) (string, bool)) (id, reason string) {
	sa := ep.GetAddress().GetSocketAddress()
	switch {
	case service == "":
		return "", skipNoCluster
	case secs <= 0:
		return "", skipNoInterval
	case sa == nil || sa.GetAddress() == "":
		return "", skipNoAddress
	}
	id, ok := resolve(service, sa.GetAddress(), sa.GetPortValue())
	if !ok || id == "" {
		return "", skipUnknown
	}
	return id, ""
}

// spreadLoad adds whole, the load of node's localities of cluster without
// endpoint stats, to loads, spread over the node's endpoints of the
// cluster by split; it reports whether it could (a period, a split and a
// known endpoint). Named metrics stay with the locality: they are not an
// endpoint's.
func spreadLoad(loads map[lrsKey]*lrsLoad, whole lrsLoad, node, cluster string, secs float64, split lrsSplit) bool {
	service := ClusterService(cluster)
	if split == nil || service == "" || secs <= 0 {
		return false
	}
	ids, shares, ok := split(node, cluster)
	if !ok || len(ids) != len(shares) {
		return false
	}
	for k, id := range ids {
		key := lrsKey{service, id}
		l := loads[key]
		if l == nil {
			l = &lrsLoad{named: map[string]*lrsMetric{}}
			loads[key] = l
		}
		l.qps += whole.qps * shares[k]
		l.eps += whole.eps * shares[k]
	}
	return len(ids) > 0
}

// addCounts adds ok successful and failed requests over secs seconds;
// secs <= 0 adds nothing.
func (l *lrsLoad) addCounts(ok, failed uint64, secs float64) {
	if secs <= 0 {
		return
	}
	l.qps += float64(ok+failed) / secs
	l.eps += float64(failed) / secs
}

// add adds the load of ep over secs seconds (> 0).
func (l *lrsLoad) add(ep *endpointv3.UpstreamEndpointStats, secs float64) {
	ok, failed := float64(ep.GetTotalSuccessfulRequests()), float64(ep.GetTotalErrorRequests())
	l.qps += (ok + failed) / secs
	l.eps += failed / secs
	for _, ms := range ep.GetLoadMetricStats() {
		name, n, total := ms.GetMetricName(), ms.GetNumRequestsFinishedWithMetric(), ms.GetTotalMetricValue()
		if name == "" || n == 0 || math.IsNaN(total) || math.IsInf(total, 0) {
			continue
		}
		m := l.named[name]
		if m == nil {
			m = &lrsMetric{}
			l.named[name] = m
		}
		m.total += total
		m.n += n
	}
}

// report is the Report of the load of k from node at now: named metrics
// are means per request (at most MaxNamed, the first by name), CPU and App
// the named utilization metrics when they are in range.
func (l *lrsLoad) report(k lrsKey, node string, now time.Time) Report {
	r := Report{Service: k.service, Endpoint: k.endpoint, Node: node, At: now, QPS: l.qps, EPS: l.eps}
	if len(l.named) == 0 {
		return r
	}
	names := make([]string, 0, len(l.named))
	for name := range l.named {
		names = append(names, name)
	}
	slices.Sort(names)
	r.Named = make(map[string]float64, min(len(names), MaxNamed))
	for _, name := range names[:min(len(names), MaxNamed)] {
		m := l.named[name]
		if v := m.total / float64(m.n); !math.IsNaN(v) && !math.IsInf(v, 0) {
			r.Named[name] = v
		}
	}
	r.CPU = lrsUtilization(l.named[lrsCPUMetric])
	r.App = lrsUtilization(l.named[lrsAppMetric])
	return r
}

// lrsUtilization is the mean of m when it is a utilization in [0,
// MaxUtilization], else 0 (unknown).
func lrsUtilization(m *lrsMetric) float64 {
	if m == nil {
		return 0
	}
	v := m.total / float64(m.n)
	if !(v >= 0 && v <= MaxUtilization) {
		return 0
	}
	return v
}
