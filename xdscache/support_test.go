package xdscache

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/translate"
)

// What the cache tests serve is built as the reconciler builds it (package
// xds, which this package may not import): translate, then encode.

// Assembly keys as xds makes them: the node's kind, then the positions of
// the configured listeners it gets ("envoy:0,1").
const (
	keyProxyless = "proxyless"
	keyEnvoy     = "envoy"
)

// world is a discovery snapshot of services svc-000.. with endpoints
// each, all healthy.
func world(services, endpoints int) discovery.Snapshot {
	var s discovery.Snapshot
	for i := range services {
		svc := discovery.Service{Name: fmt.Sprintf("svc-%03d", i)}
		for j := range endpoints {
			svc.Endpoints = append(svc.Endpoints, discovery.Endpoint{
				ID: fmt.Sprintf("svc-%03d-%03d", i, j), Address: fmt.Sprintf("10.%d.%d.%d", i/256, i%256, j),
				Port: 8080, Health: discovery.HealthHealthy, Locality: discovery.Locality{Zone: fmt.Sprintf("z%d", j%3)},
				Meta: map[string]string{},
			})
		}
		s.Services = append(s.Services, svc)
	}
	return s
}

// encode translates a service and encodes its resources.
func encode(s envoy.Service) (ServiceItems, error) {
	var out ServiceItems
	r, err := translate.ServiceResources(s)
	if err != nil {
		return out, err
	}
	for i, res := range [...]types.Resource{r.Cluster, r.LoadAssignment, r.Listener, r.Route} {
		if out[i], err = NewItem(s.Name, res); err != nil {
			return out, err
		}
	}
	return out, nil
}

// testListeners: "ingress" for edge-* nodes (with a rate limit on the
// generated RLS cluster), "internal" for nodes of cluster "mesh".
func testListeners() []translate.Listener {
	return []translate.Listener{
		{Nodes: []string{"edge-*"}, HTTPListener: envoy.HTTPListener{
			Name: "ingress", Address: "0.0.0.0:10000",
			Routes: []envoy.Route{
				{Prefix: "/api", Service: "svc-001", Timeout: 5 * time.Second},
				{Prefix: "/", Service: "svc-000"},
			},
			RateLimit: &envoy.RateLimit{Domain: "edge", Actions: [][]envoy.RateLimitAction{{{RemoteAddress: true}}}},
		}},
		{Nodes: []string{"mesh"}, HTTPListener: envoy.HTTPListener{
			Name: "internal", Address: "0.0.0.0:10001",
			Routes: []envoy.Route{{Prefix: "/", Service: "svc-002"}},
		}},
	}
}

// listenerSet is configured listeners, encoded.
type listenerSet struct {
	envoyL, apiL, route []Item
	needsRLS            []bool
	rls                 Item
}

func newListenerSet(cfg []translate.Listener, rlsAddress string) (*listenerSet, error) {
	s := &listenerSet{}
	c, err := translate.RateLimitCluster(rlsAddress, nil)
	if err != nil {
		return nil, err
	}
	if s.rls, err = NewItem(c.GetName(), c); err != nil {
		return nil, err
	}
	for _, l := range cfg {
		b, err := translate.BuildListener(l)
		if err != nil {
			return nil, err
		}
		var its [3]Item
		for i, res := range [...]types.Resource{b.Envoy, b.API, b.Route} {
			if its[i], err = NewItem(l.Name, res); err != nil {
				return nil, err
			}
		}
		s.envoyL, s.apiL, s.route = append(s.envoyL, its[0]), append(s.apiL, its[1]), append(s.route, its[2])
		s.needsRLS = append(s.needsRLS, b.NeedsRLS)
	}
	return s, nil
}

// base is the snapshot of an assembly key: the services' items and the
// listeners the key names (a nil set: none).
func (s *listenerSet) base(key string, items []ServiceItems) (*cache.Snapshot, error) {
	var ex Extras
	kind, list, _ := strings.Cut(key, ":")
	n := len(Kinds)
	if kind == keyEnvoy {
		n = LDS
	}
	rls := false
	for f := range strings.SplitSeq(list, ",") {
		if f == "" {
			continue
		}
		i, err := strconv.Atoi(f)
		if err != nil || s == nil || i >= len(s.route) {
			return nil, fmt.Errorf("bad assembly key %q", key)
		}
		if kind == keyEnvoy {
			ex[LDS] = append(ex[LDS], s.envoyL[i])
			rls = rls || s.needsRLS[i]
		} else {
			ex[LDS] = append(ex[LDS], s.apiL[i])
		}
		ex[RDS] = append(ex[RDS], s.route[i])
	}
	if rls {
		ex[CDS] = append(ex[CDS], s.rls)
	}
	return NewSnapshot(items, n, &ex)
}
