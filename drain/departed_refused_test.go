package drain

import (
	"testing"
	"time"

	"github.com/xds-server/xds-server/discovery"
)

// TestDepartedRefused: a shared departure (anyone who can write the KV
// can write one) is only served for an endpoint discovery saw here, or of
// a service discovery serves that left before this replica started, and
// never beyond the drain window; each refusal is reported once.
func TestDepartedRefused(t *testing.T) {
	const w = time.Minute
	at := func(d time.Duration) time.Time { return drainT0.Add(d) }
	phantom := func(service, id, addr string, until time.Time) Departed {
		e := ep(id)
		e.Address = addr
		return Departed{Service: service, Endpoint: e, Until: until}
	}
	for name, tc := range map[string]struct {
		started time.Duration // first Apply, after drainT0
		leaves  bool          // b is registered at start and leaves at 10m
		shared  Departed
		want    string // the reason refused, or "" when served
		addr    string // when served: the address served
	}{
		"a service discovery does not serve": {
			shared: phantom("ghostsvc", "g", "6.6.6.7", at(10*time.Minute+30*time.Second)), want: RefusedUnknownService},
		"a removal time beyond the window": {
			shared: phantom("api", "x", "6.6.6.6", time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)), want: RefusedBeyondWindow},
		"an endpoint that left after the start without being seen here": {
			shared: phantom("api", "x", "6.6.6.6", at(10*time.Minute+30*time.Second)), want: RefusedNotSeen},
		"an endpoint that left before this replica started": {
			started: 10 * time.Minute, shared: phantom("api", "x", "10.0.0.9", at(10*time.Minute+30*time.Second)), addr: "10.0.0.9"},
		"an endpoint seen here keeps the address discovery saw": {
			leaves: true, shared: phantom("api", "b", "6.6.6.6", at(10*time.Minute+30*time.Second)), addr: "10.0.0.1"},
		"an endpoint seen here, its removal time beyond the window": {
			leaves: true, shared: phantom("api", "b", "10.0.0.1", at(time.Hour)), want: RefusedBeyondWindow, addr: "10.0.0.1"},
	} {
		t.Run(name, func(t *testing.T) {
			d := NewOverlay(Policy{Window: func(string) time.Duration { return w }})
			world := []discovery.Endpoint{ep("a")}
			if tc.leaves {
				world = append(world, ep("b"))
			}
			d.Apply(drainWorld(world...), at(tc.started))
			d.ReplaceDeparted([]Departed{tc.shared})
			var out discovery.Snapshot
			for i := range 3 { // refused once, however often it is applied
				out, _ = d.Apply(drainWorld(ep("a")), at(10*time.Minute+time.Duration(i)*time.Second))
				r := d.Refusals()
				switch {
				case i == 0 && tc.want != "" && (len(r) != 1 || r[0].Reason != tc.want):
					t.Fatalf("refusals %+v, want one %s", r, tc.want)
				case (i > 0 || tc.want == "") && len(r) != 0:
					t.Fatalf("apply %d: refusals %+v, want none", i, r)
				}
			}
			served := ""
			for _, svc := range out.Services {
				for _, e := range svc.Endpoints {
					if svc.Name == tc.shared.Service && e.ID == tc.shared.Endpoint.ID {
						served = e.Address
					}
				}
			}
			if served != tc.addr {
				t.Fatalf("served %q, want %q (snapshot %+v)", served, tc.addr, out)
			}
			if _, ok := out.Service("ghostsvc"); ok {
				t.Fatal("a cluster discovery does not serve was added")
			}
		})
	}
}
