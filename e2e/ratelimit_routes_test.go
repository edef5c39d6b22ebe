package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xds-server/xds-server/e2e/harness"
	"github.com/xds-server/xds-server/envoy"
)

// TestRateLimitRoutes keeps the route config and the rate-limit config
// from drifting apart: the real binary runs the Envoy example
// (examples/envoy/xds-server.yaml, its RLS on examples/envoy/ratelimit);
// an Envoy node (edge-1 of cluster edge) fetches its listener and route
// over ADS; the descriptors Envoy would send for sample requests are
// computed from the served rate_limits by envoy.Descriptors, the code the
// generated actions come from; and the RLS answers them as
// examples/envoy/ratelimit/edge.yaml says: /api is limited to 10 requests
// per minute, then OVER_LIMIT on that descriptor alone.
func TestRateLimitRoutes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	consul := harness.Consul(t)
	// Envoy is told the RLS address: it needs its port before the start.
	srv := startServerWith(t, consul, harness.ServerOptions{PortArgs: func(addr string) []string {
		return []string{"--ratelimit.address", addr, "--ratelimit.advertise_address", addr}
	}}, "--config", "examples/envoy/xds-server.yaml")
	rlsAddr := srv.RateLimitAddr

	domain, actions := fetchRateLimits(t, srv.XDSAddr)
	if domain != "edge" {
		t.Errorf("ratelimit filter domain %q, want edge", domain)
	}
	conn, err := grpc.NewClient(rlsAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rls := rlsv3.NewRateLimitServiceClient(conn)
	ask := func(req envoy.Request) *rlsv3.RateLimitResponse {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: envoy.Descriptors(actions, req)})
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		return resp
	}

	api := envoy.Request{Method: "GET", Path: "/api/orders", Authority: "localhost:10000", RemoteAddress: "10.1.2.3",
		Headers: map[string]string{"x-user-id": "alice"}}
	want := "remote_address=10.1.2.3 | generic_key=edge,user=alice | path=api"
	if got := descriptorString(envoy.Descriptors(actions, api)); got != want {
		t.Fatalf("descriptors of GET /api/orders: %q, want %q", got, want)
	}
	// 10 per minute on (path, api): the 11th is over the limit, on that
	// descriptor only. A fixed window may roll over while we ask; then
	// the count starts again.
	ok := 0
	for range 40 {
		resp := ask(api)
		st := resp.GetStatuses()
		if len(st) != 3 {
			t.Fatalf("%d statuses, want 3: %v", len(st), resp)
		}
		if st[0].GetCode() != rlsv3.RateLimitResponse_OK || st[1].GetCode() != rlsv3.RateLimitResponse_OK {
			t.Fatalf("remote_address or user descriptor over the limit: %v", resp)
		}
		if st[2].GetCurrentLimit().GetRequestsPerUnit() != 10 || st[2].GetCurrentLimit().GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE {
			t.Fatalf("path=api limit %v, want 10 per minute", st[2].GetCurrentLimit())
		}
		if resp.GetOverallCode() == rlsv3.RateLimitResponse_OK {
			if ok++; st[2].GetLimitRemaining() == 9 {
				ok = 1 // a new window
			}
			continue
		}
		if st[2].GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("over the limit, but not on path=api: %v", resp)
		}
		break
	}
	if ok != 10 {
		t.Errorf("%d OK answers before OVER_LIMIT, want 10", ok)
	}

	// Another client, not on /api, without a user: only its address.
	web := envoy.Request{Method: "POST", Path: "/", RemoteAddress: "10.9.9.9"}
	if got := descriptorString(envoy.Descriptors(actions, web)); got != "remote_address=10.9.9.9" {
		t.Errorf("descriptors of POST /: %q", got)
	}
	if resp := ask(web); resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Errorf("POST / from another address: %v, want OK", resp)
	}
}

// fetchRateLimits subscribes to LDS and RDS as an Envoy node of cluster
// edge and returns the ingress listener's rate-limit domain and its
// route's rate-limit actions, as served.
func fetchRateLimits(t *testing.T, xdsAddr string) (string, [][]envoy.RateLimitAction) {
	t.Helper()
	conn, err := grpc.NewClient(xdsAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ads, err := harness.StartADS(ctx, harness.ADSConfig{Conn: conn, NodeID: "edge-1", Cluster: "edge", Agent: "envoy",
		Types: []string{resource.ListenerType, resource.RouteType}})
	if err != nil {
		t.Fatal(err)
	}
	defer ads.Close()
	var (
		domain  string
		actions [][]envoy.RateLimitAction
	)
	for domain == "" || actions == nil {
		var u harness.ADSUpdate
		select {
		case u = <-ads.Updates():
		case <-ctx.Done():
			t.Fatalf("no ingress listener and route within 30s (domain %q, actions %v)", domain, actions)
		}
		a, ok := u.Resources["ingress"]
		if !ok {
			continue
		}
		switch u.TypeURL {
		case resource.ListenerType:
			var l listenerv3.Listener
			var hcm hcmv3.HttpConnectionManager
			if err := a.UnmarshalTo(&l); err != nil {
				t.Fatal(err)
			}
			if err := l.GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(hcm.GetHttpFilters(), func(f *hcmv3.HttpFilter) bool { return f.GetName() == "envoy.filters.http.ratelimit" })
			if i < 0 {
				t.Fatalf("ingress listener without a ratelimit filter: %v", hcm.GetHttpFilters())
			}
			var f ratelimitv3.RateLimit
			if err := hcm.GetHttpFilters()[i].GetTypedConfig().UnmarshalTo(&f); err != nil {
				t.Fatal(err)
			}
			domain = f.GetDomain()
		case resource.RouteType:
			var rc routev3.RouteConfiguration
			if err := a.UnmarshalTo(&rc); err != nil {
				t.Fatal(err)
			}
			if actions, err = envoy.RateLimitActions(rc.GetVirtualHosts()[0].GetRateLimits()); err != nil {
				t.Fatal(err)
			}
		}
	}
	return domain, actions
}

// descriptorString renders descriptors as "k=v,k=v | k=v".
func descriptorString(ds []*rlcommon.RateLimitDescriptor) string {
	var parts []string
	for _, d := range ds {
		var es []string
		for _, e := range d.GetEntries() {
			es = append(es, e.GetKey()+"="+e.GetValue())
		}
		parts = append(parts, strings.Join(es, ","))
	}
	return strings.Join(parts, " | ")
}
