package console

import (
	"net/http"
	"testing"
	"time"

	"github.com/xds-server/xds-server/xds"
)

// TestSubsetSummaryOncePerSecond: however many service pages poll, the
// console asks the xDS server for a service's subset summary at most once
// a second, keeps only services asked for in the last second, and never
// asks for more than MaxNodeChoices node ids.
func TestSubsetSummaryOncePerSecond(t *testing.T) {
	now := t0
	calls := 0
	many := make([]string, MaxNodeChoices+10)
	for i := range many {
		many[i] = "n"
	}
	c, _, h := newTestConsole(t, func(c *Config) {
		c.Now = func() time.Time { return now }
		c.Fleet = fakeFleet{calls: &calls, subsets: map[string]xds.SubsetSummary{
			"echo":    {Service: "echo", Nodes: many, KnownNodes: len(many)},
			"greeter": {Service: "greeter"},
		}}
	})
	var v ServiceView
	for range 5 {
		get(t, h, "/ui/api/services/echo", http.StatusOK, &v)
	}
	if calls != 1 {
		t.Errorf("5 polls within a second: %d summaries, want 1", calls)
	}
	if v.Subsets == nil || len(v.Subsets.Nodes) != MaxNodeChoices || v.Subsets.KnownNodes != len(many) {
		t.Fatalf("subsets = %+v, want %d node ids of %d", v.Subsets, MaxNodeChoices, len(many))
	}
	get(t, h, "/ui/api/services/greeter", http.StatusOK, nil)
	now = now.Add(999 * time.Millisecond)
	get(t, h, "/ui/api/services/echo", http.StatusOK, nil)
	if calls != 2 {
		t.Errorf("two services within a second: %d summaries, want 2", calls)
	}
	now = now.Add(time.Millisecond)
	get(t, h, "/ui/api/services/echo", http.StatusOK, nil)
	if calls != 3 {
		t.Errorf("a second later: %d summaries, want 3", calls)
	}
	if n := len(c.subsets.m); n != 1 {
		t.Errorf("the cache holds %d services, want 1 (greeter was asked for more than a second ago)", n)
	}
	get(t, h, "/ui/api/services/nope", http.StatusNotFound, nil)
	if calls != 3 {
		t.Errorf("an unknown service was summarized: %d calls", calls)
	}
}
