package discovery

import (
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
)

func ep(id string, h Health, drain string) Endpoint {
	return Endpoint{ID: id, Address: "10.0.0.1", Port: 80, Health: h, Drain: drain}
}

func snap(svcs ...Service) Snapshot { return Snapshot{Services: svcs} }

func svc(name string, eps ...Endpoint) Service { return Service{Name: name, Endpoints: eps} }

func TestChanges(t *testing.T) {
	h, u, d := HealthHealthy, HealthUnhealthy, HealthDraining
	base := snap(svc("api", ep("a1", h, ""), ep("a2", h, "")), svc("web", ep("w1", h, "")))
	for name, tc := range map[string]struct {
		next Snapshot
		want []ServiceChange
	}{
		"nothing changed": {next: base},
		"a meta change is not a health change": {
			next: snap(svc("api", Endpoint{ID: "a1", Address: "10.0.0.2", Port: 80, Health: h}, ep("a2", h, "")), svc("web", ep("w1", h, ""))),
		},
		"a check fails": {
			next: snap(svc("api", ep("a1", u, ""), ep("a2", h, "")), svc("web", ep("w1", h, ""))),
			want: []ServiceChange{{Service: "api", Endpoints: 2, Health: [5]int{HealthHealthy: -1, HealthUnhealthy: 1}, Discovery: 1}},
		},
		"maintenance drains, admin drains": {
			next: snap(svc("api", ep("a1", d, DrainConsul), ep("a2", d, "admin,"+DrainConsul)), svc("web", ep("w1", h, ""))),
			want: []ServiceChange{{Service: "api", Endpoints: 2, Health: [5]int{HealthHealthy: -2, HealthDraining: 2},
				Drained: map[string]int{DrainConsul: 2, "admin": 1}}},
		},
		"a service appears, one disappears": {
			next: snap(svc("api", ep("a1", h, ""), ep("a2", h, "")), svc("new", ep("n1", d, DrainStatic))),
			want: []ServiceChange{
				{Service: "new", Endpoints: 1, Added: 1, Health: [5]int{HealthDraining: 1}, Drained: map[string]int{DrainStatic: 1}, Discovery: 1},
				{Service: "web", Endpoints: 0, Removed: 1, Health: [5]int{HealthHealthy: -1}, Discovery: 1},
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Changes(base, tc.next); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Changes =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
	undrain := Changes(snap(svc("api", ep("a1", d, "admin,"+DrainConsul))), snap(svc("api", ep("a1", d, DrainConsul))))
	if len(undrain) != 1 || !reflect.DeepEqual(undrain[0].Undrained, map[string]int{"admin": 1}) || undrain[0].Health != [5]int{} {
		t.Errorf("admin undrain under maintenance = %+v", undrain)
	}
	if got := undrain[0].Sources("consul"); !reflect.DeepEqual(got, []string{"admin"}) {
		t.Errorf("Sources = %v, want [admin]", got)
	}
}

// TestChangeLogStory: the first snapshot is summed up, then each update
// writes one line per changed service with counts and sources.
func TestChangeLogStory(t *testing.T) {
	var logs syncBuffer
	cl := NewChangeLog(slog.New(slog.NewTextHandler(&logs, nil)), "consul")
	h := HealthHealthy
	cl.Observe(snap(svc("api", ep("a1", h, ""), ep("a2", h, "")), svc("web", ep("w1", h, ""))))
	cl.Observe(snap(svc("api", ep("a1", HealthUnhealthy, ""), ep("a2", h, "")), svc("web", ep("w1", h, ""))))
	cl.Observe(snap(svc("api", ep("a1", HealthUnhealthy, ""), ep("a2", HealthDraining, DrainConsul)), svc("web", ep("w1", h, ""))))
	cl.Observe(snap(svc("api", ep("a1", h, ""), ep("a2", h, "")), svc("web", ep("w1", h, ""))))
	want := []string{
		`msg="first snapshot" component=discovery source=consul services=2 endpoints=3 unknown=0 healthy=3 degraded=0 unhealthy=0 draining=0`,
		`msg="endpoints changed" component=discovery service=api endpoints=2 healthy=-1 unhealthy=+1 source=consul`,
		`msg="endpoints changed" component=discovery service=api endpoints=2 healthy=-1 draining=+1 drained=consul_maintenance:1 source=consul_maintenance`,
		`msg="endpoints changed" component=discovery service=api endpoints=2 healthy=+2 unhealthy=-1 draining=-1 undrained=consul_maintenance:1 source=consul,consul_maintenance`,
	}
	lines := strings.Split(strings.TrimSpace(logs.b.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), logs.b.String())
	}
	for i, w := range want {
		if !strings.HasSuffix(lines[i], w) || !strings.Contains(lines[i], "level=INFO") {
			t.Errorf("line %d:\n got %s\nwant ...%s", i, lines[i], w)
		}
	}
}

// TestChangeLogFlapIsOneLinePerService: 1,000 endpoints of one service and
// 10 of ten others flip health in one update, then back: two updates, one
// line per changed service each, whatever the number of endpoints.
func TestChangeLogFlapIsOneLinePerService(t *testing.T) {
	world := func(h Health) Snapshot {
		big := svc("big")
		for i := range 1000 {
			big.Endpoints = append(big.Endpoints, ep(fmt.Sprintf("e%04d", i), h, ""))
		}
		s := snap(big)
		for k := range 10 {
			small := svc(fmt.Sprintf("small-%d", k))
			for i := range 10 {
				small.Endpoints = append(small.Endpoints, ep(fmt.Sprintf("e%d", i), h, ""))
			}
			s.Services = append(s.Services, small)
		}
		return s
	}
	var logs syncBuffer
	cl := NewChangeLog(slog.New(slog.NewTextHandler(&logs, nil)), "consul")
	cl.Observe(world(HealthHealthy))
	for range 5 {
		cl.Observe(world(HealthUnhealthy))
		cl.Observe(world(HealthHealthy))
	}
	out := logs.b.String()
	if got := strings.Count(out, "\n"); got != 1+10*11 {
		t.Errorf("%d lines for 10 updates of 11 services (1,100 endpoints each), want %d", got, 1+10*11)
	}
	if !strings.Contains(out, "service=big endpoints=1000 healthy=-1000 unhealthy=+1000 source=consul") {
		t.Errorf("no aggregate line for big:\n%.500s", out)
	}
}

func TestChangeLogLinesPerUpdateAreBounded(t *testing.T) {
	world := func(h Health) Snapshot {
		var s Snapshot
		for k := range MaxChangeLines + 50 {
			s.Services = append(s.Services, svc(fmt.Sprintf("s%04d", k), ep("e", h, "")))
		}
		return s
	}
	var logs syncBuffer
	cl := NewChangeLog(slog.New(slog.NewTextHandler(&logs, nil)), "static")
	cl.Observe(world(HealthHealthy))
	cl.Observe(world(HealthUnhealthy))
	out := logs.b.String()
	if got := strings.Count(out, "\n"); got != 1+MaxChangeLines+1 {
		t.Errorf("%d lines, want %d", got, MaxChangeLines+2)
	}
	if !strings.Contains(out, `msg="more services changed" component=discovery services=50`) {
		t.Errorf("no summary line:\n%.300s", out[len(out)-300:])
	}
}
