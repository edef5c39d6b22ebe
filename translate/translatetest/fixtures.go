package translatetest

import (
	"fmt"
	"time"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/translate"
)

// World is a discovery snapshot of services svc-000.. with endpoints
// each (svc-000-000..), all healthy, in zones z0..z2, on distinct
// addresses: the fleet the xds and xdscache tests serve.
func World(services, endpoints int) discovery.Snapshot {
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

// Listeners are two configured listeners: "ingress" for edge-* nodes
// (routes to svc-001 and svc-000, a rate limit on the generated RLS
// cluster) and "internal" for nodes of cluster "mesh" (a route to
// svc-002).
func Listeners() []translate.Listener {
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
