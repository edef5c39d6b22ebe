package ha

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/drain"
)

func TestLayout(t *testing.T) {
	l := Layout{Prefix: "xds-server/"}
	for _, tc := range []struct {
		t    drain.Target
		want string
	}{
		{drain.Target{Service: "api"}, "xds-server/drains/service/api"},
		{drain.Target{Service: "api", Endpoint: "a/b"}, "xds-server/drains/endpoint/api/a%2Fb"},
		{drain.Target{Node: "n 1"}, "xds-server/drains/node/n%201"},
		{drain.Target{Service: "..", Endpoint: "."}, "xds-server/drains/endpoint/%2E%2E/%2E"},
	} {
		if got := l.Drain(tc.t); got != tc.want {
			t.Errorf("Drain(%+v) = %q, want %q", tc.t, got, tc.want)
		}
	}
	if l.Summary("host-1-ab") != "xds-server/weights/summaries/host-1-ab" || l.Table() != "xds-server/weights/table" || l.Leader() != "xds-server/weights/leader" {
		t.Errorf("weights keys: %q %q %q", l.Summary("host-1-ab"), l.Table(), l.Leader())
	}
	if got := l.DepartedKey("a/b", ".."); got != "xds-server/drains/departed/a%2Fb/%2E%2E" {
		t.Errorf("DepartedKey = %q", got)
	}
}

func TestDecodeDrain(t *testing.T) {
	for name, tc := range map[string]struct {
		val string
		ok  bool
	}{
		"endpoint":         {`{"service":"api","endpoint":"a","since":"2026-01-02T03:04:05Z","until":"2026-01-02T04:04:05Z"}`, true},
		"node":             {`{"node":"n1","since":"2026-01-02T03:04:05Z"}`, true},
		"not json":         {`drain!`, false},
		"no target":        {`{"since":"2026-01-02T03:04:05Z"}`, false},
		"node and service": {`{"node":"n1","service":"api"}`, false},
		"endpoint, no svc": {`{"endpoint":"a"}`, false},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := decodeDrain([]byte(tc.val)); (err == nil) != tc.ok {
				t.Errorf("decodeDrain(%s) error = %v, want ok %v", tc.val, err, tc.ok)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{Prefix: "xds-server/", PublishInterval: 5 * time.Second, LeaderLockDelay: 15 * time.Second}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := Config{Prefix: "/x", PublishInterval: 0, LeaderLockDelay: time.Hour, AliveTTL: time.Minute}
	err := bad.Validate()
	for _, w := range []string{"prefix", "publish interval", "lock delay", "alive ttl"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate(%+v) = %v, want it to name %s", bad, err, w)
		}
	}
	if id1, id2 := NewReplicaID(), NewReplicaID(); id1 == id2 || id1 == "" {
		t.Errorf("replica ids %q and %q are not distinct", id1, id2)
	}
}

func TestDebugPage(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := DebugConfig{Replica: "r1", Prefix: "p/", Now: func() time.Time { return now }}
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/ha", nil))
	var p DebugPage
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if p.Replica != "r1" || p.Leader != "" || p.IsLeader || len(p.Summaries.Merged) != 0 || len(p.Drains.Drains) != 0 {
		t.Errorf("page without providers = %+v", p)
	}
	c.Leader = func() string { return "r1" }
	c.Summaries = func() Summaries {
		return Summaries{Published: now, Merged: []ReplicaSummary{{Replica: "r2", Updated: now.Add(-3 * time.Second)}}}
	}
	c.Drains = func() SeenDrains {
		return SeenDrains{Index: 9, Drains: []drain.Admin{{Target: drain.Target{Service: "api"}}}}
	}
	p = c.Page()
	if !p.IsLeader || len(p.Summaries.Merged) != 1 || p.Summaries.Merged[0].AgeSeconds != 3 || p.Drains.Index != 9 || len(p.Drains.Drains) != 1 {
		t.Errorf("page with providers = %+v", p)
	}
}

func TestMetricsRegisterOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Writes.WithLabelValues("drain_put").Inc()
	if got := testutil.ToFloat64(m.Writes.WithLabelValues("drain_put")); got != 1 {
		t.Errorf("writes = %v", got)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Error("a second registration succeeded")
	}
}
