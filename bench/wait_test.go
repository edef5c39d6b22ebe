package bench

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

func TestWaitSubsets(t *testing.T) {
	const svc = "bench-svc-000"
	healthy, unhealthy := corev3.HealthStatus_HEALTHY, corev3.HealthStatus_UNHEALTHY
	views := func(m cla) func(string) cla {
		return func(s string) cla {
			if s == svc {
				return m
			}
			return nil
		}
	}
	want := Want{Key: Key{Service: svc, Addr: "a:1"}, Status: unhealthy}
	for name, tc := range map[string]struct {
		before, after cla
		applies, met  bool
	}{
		"endpoint not in the view: not sampled":          {before: cla{"b:1": healthy}, applies: false},
		"endpoint in the view turns unhealthy":           {before: cla{"a:1": healthy}, after: cla{"a:1": unhealthy}, applies: true, met: true},
		"endpoint in the view still healthy":             {before: cla{"a:1": healthy}, after: cla{"a:1": healthy, "c:1": healthy}, applies: true, met: false},
		"replacement dropped from the view":              {before: cla{"a:1": healthy}, after: cla{"c:1": healthy}, applies: true, met: true},
		"no view of the service after: not met (absent)": {before: cla{"a:1": healthy}, after: cla{}, applies: true, met: true},
	} {
		t.Run(name, func(t *testing.T) {
			w := &Wait{wants: []Want{want}, subsets: true}
			mask := w.applicable(views(tc.before))
			if got := mask != 0; got != tc.applies {
				t.Fatalf("applies = %v, want %v", got, tc.applies)
			}
			if !tc.applies {
				return
			}
			w.apply = []uint64{mask}
			if got := w.satisfiedBy(0, views(tc.after)); got != tc.met {
				t.Errorf("met = %v, want %v", got, tc.met)
			}
		})
	}
	t.Run("a HEALTHY want is not met by absence", func(t *testing.T) {
		w := &Wait{wants: []Want{{Key: want.Key, Status: healthy}}, subsets: true, apply: []uint64{all}}
		if w.satisfiedBy(0, views(cla{"c:1": healthy})) {
			t.Error("met without the endpoint")
		}
	})
	t.Run("count want", func(t *testing.T) {
		w := &Wait{wants: Catalog{Services: 1, Endpoints: 20}.Present(5), subsets: true, apply: []uint64{all}}
		if w.satisfiedBy(0, views(cla{"a:1": healthy, "b:1": healthy})) {
			t.Error("2 endpoints met a want of 5")
		}
		if !w.satisfiedBy(0, views(cla{"a:1": healthy, "b:1": healthy, "c:1": healthy, "d:1": unhealthy, "e:1": healthy})) {
			t.Error("5 endpoints did not meet a want of 5")
		}
	})
}
