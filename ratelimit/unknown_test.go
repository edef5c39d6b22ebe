package ratelimit

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// TestUnknownDomainOverHTTP: a domain no rule knows is answered 200 OK (as
// Envoy expects) with a header and a body field naming it, and counted;
// a known domain has neither.
func TestUnknownDomainOverHTTP(t *testing.T) {
	ts := newTestService(t, simpleYAML, nil)
	h := ts.HTTPHandler()
	post := func(domain string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		body := fmt.Sprintf(`{"domain": %q, "descriptors": [{"entries": [{"key": "k", "value": "a"}]}]}`, domain)
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/ratelimit", strings.NewReader(body)))
		return rec
	}
	rec := post("nope")
	var body struct {
		UnknownDomain bool   `json:"unknown_domain"`
		OverallCode   string `json:"overall_code"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	if rec.Code != http.StatusOK || body.OverallCode != "OK" || !body.UnknownDomain || rec.Header().Get(UnknownDomainHeader) != "nope" {
		t.Errorf("unknown domain: %d %s %q %+v", rec.Code, rec.Body, rec.Header().Get(UnknownDomainHeader), body)
	}
	rec = post("d")
	if rec.Header().Get(UnknownDomainHeader) != "" || strings.Contains(rec.Body.String(), "unknown_domain") {
		t.Errorf("known domain marked unknown: %v %s", rec.Header(), rec.Body)
	}
	if got := ts.counter(t, "ratelimit_unknown_domain_total", "domain", "nope"); got != 1 {
		t.Errorf("ratelimit_unknown_domain_total{domain=nope} = %v, want 1", got)
	}
}

// TestUnknownDomainLabelsAreBounded floods distinct unknown domains: the
// first MaxUnknownDomainLabels get a series, the rest count as "other".
func TestUnknownDomainLabelsAreBounded(t *testing.T) {
	ts := newTestService(t, simpleYAML, nil)
	const flood = 1000
	for i := range flood {
		if _, err := ts.ShouldRateLimit(context.Background(), request(fmt.Sprint("dom-", i), "k=a")); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, mf := range mfs {
		if mf.GetName() == "ratelimit_unknown_domain_total" {
			series = len(mf.GetMetric())
		}
	}
	if series != MaxUnknownDomainLabels+1 {
		t.Errorf("%d series, want %d", series, MaxUnknownDomainLabels+1)
	}
	if got := ts.counter(t, "ratelimit_unknown_domain_total", "domain", "other"); got != flood-MaxUnknownDomainLabels {
		t.Errorf("other = %v, want %d", got, flood-MaxUnknownDomainLabels)
	}
	if got := ts.counter(t, "ratelimit_unknown_domain_total", "domain", "dom-5"); got != 1 {
		t.Errorf("dom-5 = %v, want 1", got)
	}
}

// TestUnknownDomainOverGRPC: over a real gRPC connection the answer is OK
// and the response header metadata names the unknown domain.
func TestUnknownDomainOverGRPC(t *testing.T) {
	ts := newTestService(t, simpleYAML, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(ServerOptions()...)
	ts.Register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := rlsv3.NewRateLimitServiceClient(conn)
	for domain, want := range map[string]string{"nope": "nope", "d": ""} {
		var md metadata.MD
		resp, err := client.ShouldRateLimit(ctx, request(domain, "k=a"), grpc.Header(&md))
		if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
			t.Fatalf("%s: %v %v", domain, resp, err)
		}
		if got := strings.Join(md.Get(UnknownDomainHeader), ","); got != want {
			t.Errorf("%s: header %q, want %q", domain, got, want)
		}
	}
}
