package ratelimit

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const fuzzRLSYAML = `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: tenant
    descriptors:
      - key: path
        value: "/api/*"
        rate_limit: {unit: minute, requests_per_unit: 5, name: api}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
`

// newFuzzService is a Service over the memory store and a fixed clock.
func newFuzzService(tb testing.TB) *Service {
	tb.Helper()
	mem, err := NewMemory(MemoryConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	cfg, err := Load(File{Name: "fuzz.yaml", Data: []byte(fuzzRLSYAML)})
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	s, err := NewService(ServiceConfig{Store: mem, Config: cfg, Now: func() time.Time { return now }})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// FuzzHTTPHandler posts arbitrary bodies to /v1/ratelimit: the answer is
// one of the documented codes, always JSON, and bounded.
func FuzzHTTPHandler(f *testing.F) {
	for _, seed := range []string{
		`{"domain": "d", "descriptors": [{"entries": [{"key": "k", "value": "a"}]}]}`,
		`{"domain": "d", "hitsAddend": 3, "descriptors": [{"entries": [{"key": "k", "value": "a"}], "hitsAddend": 0}]}`,
		`{"domain": "d", "descriptors": [{"entries": [{"key": "tenant", "value": "t"}, {"key": "path", "value": "/api/x"}]}]}`,
		`{"domain": "d", "descriptors": [{"entries": [{"key": "k", "value": "b"}], "limit": {"requests_per_unit": 7, "unit": "HOUR"}}]}`,
		`{"domain": ""}`, `{"domain": `, `{"domian": "d"}`, `null`, `[]`, ``,
	} {
		f.Add([]byte(seed))
	}
	s := newFuzzService(f)
	h := s.HTTPHandler()
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/ratelimit", strings.NewReader(string(body))))
		switch rec.Code {
		case http.StatusOK, http.StatusTooManyRequests, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("answer is not JSON: %q", rec.Body)
		}
		// A descriptor status is a few hundred bytes; the request is at
		// most 1 MiB and its descriptors are bounded.
		if rec.Body.Len() > 4*maxHTTPBody {
			t.Fatalf("answer of %d bytes for a body of %d", rec.Body.Len(), len(body))
		}
		if rec.Code == http.StatusBadRequest && !strings.Contains(rec.Body.String(), `"error"`) {
			t.Fatalf("400 without an error message: %s", rec.Body)
		}
	})
}
