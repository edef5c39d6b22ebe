package e2e

import (
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/e2e/harness"
)

// TestWeightsFromHTTPPush runs the real binary on a static endpoints file
// and pushes utilization over POST /v1/load: bad reports are refused with
// a 400 naming the problem, good ones become weights 2:1 on /debug/weights.
func TestWeightsFromHTTPPush(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	dir := t.TempDir()
	endpoints := filepath.Join(dir, "endpoints.yaml")
	config := filepath.Join(dir, "xds-server.yaml")
	write(t, endpoints, `services:
  - name: api
    endpoints:
      - { id: api-1, address: 127.0.0.1, port: 9001 }
      - { id: api-2, address: 127.0.0.1, port: 9002 }
`)
	write(t, config, `services:
  api: { weights: { enabled: true, sources: [http] } }
weights: { blackout_period: 0s, smoothing: 1, update_period: 50ms, min_push_interval: 50ms }
`)
	srv := harness.StartServer(t, "--config", config, "--discovery.static.file", endpoints)
	srv.WaitReady(t)
	post := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post("http://"+srv.AdminAddr+"/v1/load", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for name, tc := range map[string]struct{ body, want string }{
		"unknown endpoint": {`{"service": "api", "endpoint": "api-9", "utilization": 0.5, "qps": 10}`, "api-9"},
		"negative qps":     {`{"service": "api", "endpoint": "api-1", "utilization": 0.5, "qps": -1}`, "qps"},
		"unknown field":    {`{"service": "api", "endpoint": "api-1", "load": 0.5}`, "load"},
		"not json":         {`utilization=0.5`, "invalid"},
	} {
		if code, body := post(tc.body); code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s; want 400 naming %q", name, code, body, tc.want)
		}
	}
	if code, body := post(`{"reports": [
		{"service": "api", "endpoint": "api-1", "utilization": 0.25, "qps": 100},
		{"service": "api", "endpoint": "api-2", "utilization": 0.5, "qps": 100}]}`); code/100 != 2 {
		t.Fatalf("good batch: %d %s", code, body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var st struct {
			Rows []struct {
				Endpoint string  `json:"endpoint"`
				Weight   float64 `json:"weight"`
			} `json:"endpoints"`
		}
		if tryGetJSON("http://"+srv.AdminAddr+"/debug/weights?service=api", &st) && len(st.Rows) == 2 &&
			math.Abs(st.Rows[0].Weight/st.Rows[1].Weight-2) < 0.05 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("weights of api never 2:1: %+v", st)
		}
		time.Sleep(50 * time.Millisecond) // polling an HTTP page: no event to await
	}
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}
