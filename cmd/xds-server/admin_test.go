package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/xds"
)

func TestAdminEndpoints(t *testing.T) {
	reg := newRegistry()
	srv, err := xds.New(xds.Config{Registerer: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	dm := discovery.NewMetrics(reg)
	h := adminHandler(srv, reg)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d", code)
	}
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before the first snapshot = %d, want 503", code)
	}

	src, err := discovery.NewStatic(discovery.StaticConfig{File: "../../examples/endpoints.yaml", Metrics: dm})
	if err != nil {
		t.Fatal(err)
	}
	srv.Update(src.Snapshot())
	srv.Reconcile() // what the loop does after the debounce
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the first snapshot = %d, want 200", code)
	}

	code, body := get("/metrics")
	for _, want := range []string{
		`xds_service_endpoints{health="healthy",service="echo"} 3`,
		`xds_service_endpoints{health="draining",service="greeter"} 1`,
		"xds_connected_nodes 0", "xds_reconciles_total 1", "go_goroutines",
	} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/metrics (%d) lacks %q", code, want)
		}
	}

	code, body = get("/debug/nodes")
	var nodes struct{ Nodes []xds.Node }
	if err := json.Unmarshal([]byte(body), &nodes); code != http.StatusOK || err != nil || len(nodes.Nodes) != 0 {
		t.Errorf("/debug/nodes = %d %q (%v)", code, body, err)
	}
	if code, _ := get("/debug/config"); code != http.StatusBadRequest {
		t.Errorf("/debug/config without node = %d, want 400", code)
	}
	if code, _ := get("/debug/config?node=nobody"); code != http.StatusNotFound {
		t.Errorf("/debug/config for an unknown node = %d, want 404", code)
	}
	if code, body := get("/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile:") {
		t.Errorf("/debug/pprof/goroutine = %d %.80q", code, body)
	}
}

func TestConsoleURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:9901": "http://127.0.0.1:9901/ui/",
		"0.0.0.0:9901":   "http://localhost:9901/ui/",
		"[::]:9901":      "http://localhost:9901/ui/",
		"[::1]:9901":     "http://[::1]:9901/ui/",
	} {
		tcp, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := consoleURL(tcp, false); got != want {
			t.Errorf("consoleURL(%s) = %q, want %q", addr, got, want)
		}
	}
	tcp, _ := net.ResolveTCPAddr("tcp", "10.0.0.1:443")
	if got := consoleURL(tcp, true); got != "https://10.0.0.1:443/ui/" {
		t.Errorf("consoleURL with TLS = %q", got)
	}
}
