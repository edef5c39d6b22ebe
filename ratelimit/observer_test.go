package ratelimit

import (
	"sync"
	"testing"
)

// recorder is an Observer that keeps every decision.
type recorder struct {
	mu  sync.Mutex
	got []Decision
}

func (r *recorder) ObserveDecision(d Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, d)
}

// TestObserver: the observer sees each descriptor the store or the local
// over-limit cache decided, once, with its key, class and usage; not the
// unlimited or unmatched ones.
func TestObserver(t *testing.T) {
	rec := &recorder{}
	ts := newTestService(t, `
domain: d
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: open
    rate_limit: {unlimited: true}
`, func(c *ServiceConfig) { c.Observer = rec })
	for range 3 {
		ts.call(t, request("d", "user=a,criticality=SHEDDABLE", "open=x", "nothing=y"))
	}
	ts.call(t, request("other", "user=a"))
	want := []Decision{
		{Domain: "d", Key: "d_user_a_", Rule: "d.user", Class: Sheddable, Hits: 1, Used: 1, Limit: 2, Allowed: true},
		{Domain: "d", Key: "d_user_a_", Rule: "d.user", Class: Sheddable, Hits: 1, Used: 2, Limit: 2, Allowed: true},
		{Domain: "d", Key: "d_user_a_", Rule: "d.user", Class: Sheddable, Hits: 1, Used: 3, Limit: 2, Allowed: false}, // fixed windows count refused hits too
	}
	if len(rec.got) != len(want) {
		t.Fatalf("observed %d decisions, want %d: %+v", len(rec.got), len(want), rec.got)
	}
	for i, d := range rec.got {
		if d != want[i] {
			t.Errorf("decision %d = %+v, want %+v", i, d, want[i])
		}
	}
}
