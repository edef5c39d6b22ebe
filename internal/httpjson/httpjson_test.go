package httpjson

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWrite(t *testing.T) {
	v := map[string]any{"error": "x", "n": 1}
	for name, tc := range map[string]struct {
		write func(http.ResponseWriter, int, any)
		body  string
	}{
		"indented": {Write, "{\n  \"error\": \"x\",\n  \"n\": 1\n}\n"},
		"compact":  {WriteCompact, "{\"error\":\"x\",\"n\":1}\n"},
	} {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tc.write(rec, http.StatusTeapot, v)
			if rec.Code != http.StatusTeapot {
				t.Errorf("code %d, want %d", rec.Code, http.StatusTeapot)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q", got)
			}
			if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q", got)
			}
			if got := rec.Body.String(); got != tc.body {
				t.Errorf("body %q, want %q", got, tc.body)
			}
		})
	}
}
