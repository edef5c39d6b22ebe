package discovery

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// snapOf builds a snapshot from "service:count" pairs; endpoint IDs are
// <service>-<i>.
func snapOf(counts ...any) Snapshot {
	var s Snapshot
	for i := 0; i+1 < len(counts); i += 2 {
		name, n := counts[i].(string), counts[i+1].(int)
		svc := Service{Name: name, Endpoints: []Endpoint{}}
		for j := range n {
			svc.Endpoints = append(svc.Endpoints, Endpoint{ID: fmt.Sprintf("%s-%d", name, j), Address: "10.0.0.1", Port: 80 + j, Health: HealthHealthy})
		}
		s.Services = append(s.Services, svc)
	}
	return s
}

// guardStep is one call of a guard table test: an Offer of snap at time
// at (seconds after t0), or a Due at that time when snap is nil.
type guardStep struct {
	at   float64
	snap *Snapshot
	// what the call must return
	apply, held, started, cancelled, expired bool // held...expired: of the whole-update hold
	applied                                  int  // endpoints of the applied snapshot, when apply
	until                                    float64
	removed                                  int
	services                                 string // "name:event@until" of v.Services, space separated
}

func offer(at float64, s Snapshot) guardStep { return guardStep{at: at, snap: &s} }
func due(at float64) guardStep               { return guardStep{at: at} }

func (s guardStep) applies(n int) guardStep { s.apply, s.applied = true, n; return s }
func (s guardStep) holds(until float64) guardStep {
	s.held, s.until = true, until
	return s
}
func (s guardStep) starts() guardStep    { s.started = true; return s }
func (s guardStep) cancels() guardStep   { s.cancelled = true; return s }
func (s guardStep) expires() guardStep   { s.expired = true; return s }
func (s guardStep) gone(n int) guardStep { s.removed = n; return s }

// svc expects the service holds of the verdict, as "name:event@until"
// (until in seconds after t0), space separated.
func (s guardStep) svc(holds string) guardStep { s.services = holds; return s }

// describeHolds renders v.Services as guardStep.services does.
func describeHolds(v Verdict, t0 time.Time) string {
	var parts []string
	for _, h := range v.Services {
		parts = append(parts, fmt.Sprintf("%s:%s@%g", h.Name, h.Event, h.Until.Sub(t0).Seconds()))
	}
	return strings.Join(parts, " ")
}

func TestRemovalGuard(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	sec := func(f float64) time.Time { return t0.Add(time.Duration(f * float64(time.Second))) }
	full := snapOf("a", 4, "b", 4, "c", 2) // 10 instances
	for name, tc := range map[string]struct {
		fraction float64
		hold     time.Duration
		steps    []guardStep
	}{
		"the first snapshot is applied, even an empty one": {0.5, 30 * time.Second, []guardStep{
			offer(0, Snapshot{}).applies(0),
			offer(1, full).applies(10),
		}},
		"one instance leaving is applied at once": {0.5, 30 * time.Second, []guardStep{
			offer(0, full).applies(10),
			offer(1, snapOf("a", 4, "b", 4, "c", 1)).applies(9).gone(1),
			offer(2, snapOf("a", 4, "b", 4)).applies(8).gone(1), // the last one of c
		}},
		"a service that loses most of its own instances has its removals held, the rest is applied": {0.5, 30 * time.Second, []guardStep{
			offer(0, full).applies(10),
			offer(1, snapOf("a", 4, "b", 4)).applies(10).gone(2).svc("c:started@31"),
			offer(2, snapOf("a", 4, "b", 5)).applies(11).gone(2).svc("c:kept@31"), // b's new instance at once
			due(30.9).gone(2).svc("c:kept@31"),
			due(31).applies(9).gone(2).svc("c:expired@31"),
			due(32), // nothing held any more
		}},
		"a held service's hold is cancelled when its instances come back": {0.5, 30 * time.Second, []guardStep{
			offer(0, full).applies(10),
			offer(1, snapOf("a", 4, "b", 4)).applies(10).gone(2).svc("c:started@31"),
			offer(5, snapOf("a", 4, "b", 4, "c", 1)).applies(9).gone(1).svc("c:cancelled@31"),
			due(31),
		}},
		"several services are held at once, each until its own deadline": {0.5, 30 * time.Second, []guardStep{
			offer(0, full).applies(10),
			offer(1, snapOf("a", 4, "b", 4)).applies(10).gone(2).svc("c:started@31"),
			offer(5, snapOf("a", 1, "b", 4)).applies(10).gone(5).svc("a:started@35 c:kept@31"),
			due(31).applies(8).gone(5).svc("a:kept@35 c:expired@31"),
			due(35).applies(5).gone(3).svc("a:expired@35"),
		}},
		"an offer after a service's deadline applies its removals": {0.5, 30 * time.Second, []guardStep{
			offer(0, full).applies(10),
			offer(1, snapOf("a", 4, "b", 4)).applies(10).gone(2).svc("c:started@31"),
			offer(40, snapOf("a", 4, "b", 4)).applies(8).gone(2).svc("c:expired@31"),
		}},
		"exactly the fraction is not more than it": {0.5, 30 * time.Second, []guardStep{
			offer(0, full).applies(10),
			offer(1, snapOf("a", 2, "b", 2, "c", 1)).applies(5).gone(5),
		}},
		"an emptied catalog is held whole, then applied": {0.5, 30 * time.Second, []guardStep{
			offer(0, full).applies(10),
			offer(1, Snapshot{}).holds(31).starts().gone(10),
			due(30.9).holds(31).gone(10),
			due(31).applies(0).expires().gone(10),
			offer(32, full).applies(10), // after an empty one, anything goes
		}},
		"more than the fraction of all instances gone is held whole": {0.5, 30 * time.Second, []guardStep{
			offer(0, full).applies(10),
			offer(1, snapOf("a", 4)).holds(31).starts().gone(6),
		}},
		"services emptied but listed count as removed": {0.5, 30 * time.Second, []guardStep{
			offer(0, full).applies(10),
			offer(1, snapOf("a", 0, "b", 0, "c", 0)).holds(31).starts().gone(10),
		}},
		"health changes are not removals": {0.5, 30 * time.Second, []guardStep{
			offer(0, full).applies(10),
			offer(1, unhealthy(full)).applies(10),
		}},
		"instances replaced by new ids are removals": {0.5, 30 * time.Second, []guardStep{
			offer(0, snapOf("a", 4)).applies(4),
			offer(1, snapOf("z", 4)).holds(31).starts().gone(4),
		}},
		"a restore during the whole hold cancels it": {0.5, 30 * time.Second, []guardStep{
			offer(0, full).applies(10),
			offer(1, Snapshot{}).holds(31).starts().gone(10),
			offer(5, snapOf("a", 4, "b", 4, "c", 1)).applies(9).cancels().gone(1),
			due(31), // nothing held any more
		}},
		"a mass removal during the whole hold keeps the clock": {0.5, 30 * time.Second, []guardStep{
			offer(0, full).applies(10),
			offer(1, Snapshot{}).holds(31).starts().gone(10),
			offer(20, snapOf("a", 2)).holds(31).gone(8),
			due(31).applies(2).expires().gone(8), // the newest held snapshot
		}},
		"an offer after the whole deadline applies at once": {0.5, 30 * time.Second, []guardStep{
			offer(0, full).applies(10),
			offer(1, Snapshot{}).holds(31).starts().gone(10),
			offer(40, snapOf("a", 1)).applies(1).expires().gone(9),
		}},
		"a whole hold during a service's hold: the service's ends with it": {0.5, 30 * time.Second, []guardStep{
			offer(0, full).applies(10),
			offer(1, snapOf("a", 4, "b", 4)).applies(10).gone(2).svc("c:started@31"),
			offer(2, snapOf("b", 4)).holds(32).starts().gone(6).svc("c:kept@31"),
			due(31).holds(32).gone(6).svc("c:kept@31"),
			due(32).applies(4).expires().gone(6).svc("c:expired@31"),
		}},
		"a whole hold cancelled while a service is held: the service's hold goes on": {0.5, 30 * time.Second, []guardStep{
			offer(0, full).applies(10),
			offer(1, snapOf("a", 4, "b", 4)).applies(10).gone(2).svc("c:started@31"),
			offer(2, snapOf("b", 4)).holds(32).starts().gone(6).svc("c:kept@31"),
			offer(3, snapOf("a", 4, "b", 4)).applies(10).cancels().gone(2).svc("c:kept@31"),
			due(31).applies(8).gone(2).svc("c:expired@31"),
		}},
		"without a window a removal is measured from the applied snapshot": {0.5, 30 * time.Second, []guardStep{
			offer(0, full).applies(10),
			offer(1, snapOf("a", 4, "b", 2, "c", 1)).applies(7).gone(3),
			offer(2, snapOf("a", 4, "b", 1, "c", 1)).applies(6).gone(1),
			offer(3, snapOf("a", 1, "b", 1, "c", 1)).applies(6).gone(3).svc("a:started@33"),
		}},
		"fraction 1 never holds": {1, 30 * time.Second, []guardStep{
			offer(0, full).applies(10),
			offer(1, Snapshot{}).applies(0).gone(10),
		}},
		"hold 0 never holds": {0.5, 0, []guardStep{
			offer(0, full).applies(10),
			offer(1, snapOf("a", 4, "b", 4)).applies(8).gone(2),
			offer(2, Snapshot{}).applies(0).gone(8),
		}},
		"a small fraction holds smaller removals": {0.1, 10 * time.Second, []guardStep{
			offer(0, full).applies(10),
			offer(1, snapOf("a", 4, "b", 4)).holds(11).starts().gone(2),
			due(11).applies(8).expires().gone(2),
		}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewRemovalGuard(tc.fraction, tc.hold, 0)
			for i, st := range tc.steps {
				var v Verdict
				if st.snap != nil {
					v = g.Offer(*st.snap, sec(st.at))
				} else {
					v = g.Due(sec(st.at))
				}
				type flags struct {
					apply, held, started, cancelled, expired bool
					removed                                  int
					services                                 string
				}
				want := flags{st.apply, st.held, st.started, st.cancelled, st.expired, st.removed, st.services}
				got := flags{v.Apply, v.Held, v.Started, v.Cancelled, v.Expired, v.Removed, describeHolds(v, t0)}
				if got != want {
					t.Fatalf("step %d: got %+v, want %+v", i, got, want)
				}
				if st.apply && v.Snapshot.EndpointCount() != st.applied {
					t.Errorf("step %d: applied %d endpoints, want %d", i, v.Snapshot.EndpointCount(), st.applied)
				}
				if st.held && !v.Until.Equal(sec(st.until)) {
					t.Errorf("step %d: until %v, want %v", i, v.Until.Sub(t0), sec(st.until).Sub(t0))
				}
			}
		})
	}
}

func unhealthy(s Snapshot) Snapshot {
	out := Snapshot{}
	for _, svc := range s.Services {
		eps := make([]Endpoint, len(svc.Endpoints))
		for i, ep := range svc.Endpoints {
			ep.Health = HealthUnhealthy
			eps[i] = ep
		}
		out.Services = append(out.Services, Service{Name: svc.Name, Endpoints: eps})
	}
	return out
}

func timeAt(ns int64) time.Time { return time.Unix(1_700_000_000, ns) }
