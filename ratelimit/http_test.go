package ratelimit

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHTTPHandler(t *testing.T) {
	for name, tc := range map[string]struct {
		method, body string
		code         int
		want         []string // substrings of the body
	}{
		"decision": {http.MethodPost,
			`{"domain": "d", "descriptors": [{"entries": [{"key": "k", "value": "a"}]}, {"entries": [{"key": "x", "value": "y"}]}]}`,
			http.StatusOK, []string{`"overall_code":"OK"`, `"limit_remaining":1`, `"requests_per_unit":2`, `"unit":"SECOND"`, `"duration_until_reset":"1s"`}},
		"camelCase and a look": {http.MethodPost,
			`{"domain": "d", "hitsAddend": 3, "descriptors": [{"entries": [{"key": "k", "value": "a"}], "hitsAddend": 0}]}`,
			http.StatusOK, []string{`"limit_remaining":2`}},
		"over limit": {http.MethodPost,
			`{"domain": "d", "hits_addend": 3, "descriptors": [{"entries": [{"key": "k", "value": "a"}]}]}`,
			http.StatusTooManyRequests, []string{`"overall_code":"OVER_LIMIT"`}},
		"override": {http.MethodPost,
			`{"domain": "d", "descriptors": [{"entries": [{"key": "k", "value": "b"}], "limit": {"requests_per_unit": 7, "unit": "HOUR"}}]}`,
			http.StatusOK, []string{`"requests_per_unit":7`, `"limit_remaining":6`}},
		"invalid request": {http.MethodPost, `{"domain": ""}`, http.StatusBadRequest, []string{`"error":"ratelimit: domain must not be empty"`}},
		"malformed json":  {http.MethodPost, `{"domain": `, http.StatusBadRequest, []string{"malformed request"}},
		"unknown field":   {http.MethodPost, `{"domian": "d"}`, http.StatusBadRequest, []string{"malformed request"}},
		"wrong method":    {http.MethodGet, ``, http.StatusMethodNotAllowed, []string{"use POST"}},
		"body over 1 MiB": {http.MethodPost, `{"domain": "` + strings.Repeat("x", maxHTTPBody) + `"}`, http.StatusRequestEntityTooLarge, []string{"request body"}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newTestService(t, simpleYAML, nil).HTTPHandler()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, "/v1/ratelimit", strings.NewReader(tc.body)))
			if rec.Code != tc.code {
				t.Errorf("status %d, want %d: %s", rec.Code, tc.code, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
			if !json.Valid(rec.Body.Bytes()) {
				t.Errorf("body is not JSON: %s", rec.Body)
			}
			for _, w := range tc.want {
				if !strings.Contains(strings.ReplaceAll(rec.Body.String(), " ", ""), strings.ReplaceAll(w, " ", "")) {
					t.Errorf("body %s does not contain %s", rec.Body, w)
				}
			}
		})
	}
}
