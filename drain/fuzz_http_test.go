package drain

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/discovery"
)

// FuzzDrainAPI sends arbitrary requests to /v1/drain: every answer is
// one of the documented codes and JSON, and the admin drains never
// outnumber the targets the snapshot has (services, endpoints, nodes).
func FuzzDrainAPI(f *testing.F) {
	for _, seed := range []struct{ method, query, body string }{
		{"POST", "", `{"service": "api", "endpoint": "api-1", "ttl": "10m"}`},
		{"POST", "", `{"service": "api", "ttl": 30}`},
		{"POST", "", `{"node": "n1"}`},
		{"POST", "", `{"service": "api", "ttl": -1}`},
		{"POST", "", `{"service": "api", "ttl": 0}`},
		{"POST", "", `{"service": "api", "ttl": "1ns"}`},
		{"POST", "", `{"service": "nope"}`},
		{"POST", "", `{"service": "api"} {"service": "web"}`},
		{"DELETE", "?service=api&endpoint=api-1", ``},
		{"DELETE", "", `{"service": "api", "ttl": "1s"}`},
		{"GET", "", ``},
		{"PUT", "", `{}`},
	} {
		f.Add(seed.method, seed.query, []byte(seed.body))
	}
	now := time.Unix(1_700_000_000, 0)
	m, err := New(Config{Emit: func(discovery.Snapshot) {}, Now: func() time.Time { return now }})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(m.Close)
	m.Observe(discovery.Snapshot{Services: []discovery.Service{
		{Name: "api", Endpoints: []discovery.Endpoint{{ID: "api-1", Address: "10.0.0.1", Port: 80, Node: "n1"},
			{ID: "api-2", Address: "10.0.0.2", Port: 80, Node: "n2"}}},
		{Name: "web", Endpoints: []discovery.Endpoint{{ID: "web-1", Address: "10.0.0.3", Port: 80, Node: "n1"}}},
	}})
	const targets = 2 + 3 + 2 // services, endpoints, nodes
	h := m.Handler()
	f.Fuzz(func(t *testing.T, method, query string, body []byte) {
		switch method {
		case "GET", "POST", "DELETE", "PUT", "PATCH":
		default:
			method = "POST"
		}
		req := httptest.NewRequest(method, "/v1/drain", strings.NewReader(string(body)))
		req.URL.RawQuery = strings.TrimPrefix(query, "?") // as the server's parser leaves it
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed:
		default:
			t.Fatalf("%s %s %q: status %d", method, query, body, rec.Code)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("answer is not JSON: %q", rec.Body)
		}
		st := m.State()
		if len(st.Admin) > targets {
			t.Fatalf("%d admin drains for %d targets", len(st.Admin), targets)
		}
		for _, a := range st.Admin {
			if a.Until.IsZero() {
				continue
			}
			if ttl := a.Until.Sub(a.Since); ttl < MinTTL || ttl > MaxTTL {
				t.Fatalf("drain %+v: ttl %v outside [%v, %v]", a, ttl, MinTTL, MaxTTL)
			}
		}
	})
}
