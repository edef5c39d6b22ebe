package translate_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/drain"
	"github.com/xds-server/xds-server/translate/translatetest"
)

// TestGoldenDrainInputs: the drained endpoint of each drain_* golden case
// is what package drain makes of it: the registered endpoint (serving,
// no reason; as the discovery source hands it over for the sources it
// sets itself) run through a drain.Overlay with that source in force. So
// the goldens show each source as it reaches a node.
func TestGoldenDrainInputs(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	only := func(svc discovery.Service, id string) discovery.Service {
		svc.Endpoints = slices.DeleteFunc(slices.Clone(svc.Endpoints), func(e discovery.Endpoint) bool { return e.ID == id })
		return svc
	}
	cases := map[string]func(raw discovery.Service, id string) discovery.Snapshot{
		"drain_consul_maintenance": overlayWith(drain.Policy{}, nil),
		"drain_static":             overlayWith(drain.Policy{}, nil),
		"drain_meta":               overlayWith(drain.Policy{MetaKey: "maintenance"}, nil),
		"drain_meta_key_drain":     overlayWith(drain.Policy{MetaKey: "drain"}, nil),
		"drain_tag":                overlayWith(drain.Policy{Tag: "drain"}, nil),
		"drain_admin": overlayWith(drain.Policy{}, func(o *drain.Overlay, id string) {
			o.SetAdmin(drain.Admin{Target: drain.Target{Service: "api", Endpoint: id}, Since: t0})
		}),
		"drain_orca": overlayWith(drain.Policy{}, func(o *drain.Overlay, id string) { o.SetORCA("api", id, true) }),
		"drain_admin_meta_orca": overlayWith(drain.Policy{MetaKey: "maintenance"}, func(o *drain.Overlay, id string) {
			o.SetAdmin(drain.Admin{Target: drain.Target{Service: "api", Endpoint: id}, Since: t0})
			o.SetORCA("api", id, true)
		}),
		"drain_deregistered": func(raw discovery.Service, id string) discovery.Snapshot {
			o := drain.NewOverlay(drain.Policy{Window: func(string) time.Duration { return time.Minute }})
			o.Apply(discovery.Snapshot{Services: []discovery.Service{raw}}, t0)
			out, _ := o.Apply(discovery.Snapshot{Services: []discovery.Service{only(raw, id)}}, t0.Add(time.Second))
			return out
		},
	}
	for name, apply := range cases {
		t.Run(name, func(t *testing.T) {
			in, _, err := translatetest.Load(filepath.Join(goldenDir, name+".in.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			svc := in.Snapshot.Services[0]
			i := slices.IndexFunc(svc.Endpoints, func(e discovery.Endpoint) bool { return e.Drain != "" })
			if i < 0 {
				t.Fatal("the case drains no endpoint")
			}
			want := svc.Endpoints[i]
			raw := svc
			raw.Endpoints = slices.Clone(svc.Endpoints)
			if name != "drain_consul_maintenance" && name != "drain_static" { // the sources drain sets
				raw.Endpoints[i].Health, raw.Endpoints[i].Drain = discovery.HealthHealthy, ""
			}
			out := apply(raw, want.ID)
			got, ok := out.Service("api")
			if !ok || !slices.EqualFunc(got.Endpoints, svc.Endpoints, discovery.Endpoint.Equal) {
				t.Errorf("drain gives %+v\nthe case has %+v", got.Endpoints, svc.Endpoints)
			}
		})
	}
}

// overlayWith applies an overlay with policy p, set up by set, to raw.
func overlayWith(p drain.Policy, set func(o *drain.Overlay, id string)) func(discovery.Service, string) discovery.Snapshot {
	return func(raw discovery.Service, id string) discovery.Snapshot {
		o := drain.NewOverlay(p)
		if set != nil {
			set(o, id)
		}
		out, _ := o.Apply(discovery.Snapshot{Services: []discovery.Service{raw}}, time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC))
		return out
	}
}
