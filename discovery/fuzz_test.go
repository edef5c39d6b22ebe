package discovery

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"
)

// FuzzParseStatic parses arbitrary static endpoints files: an error, or
// services that Normalize turns into a sorted, valid snapshot no larger
// than the file; a blank file is always an error (ErrNoServices when empty).
func FuzzParseStatic(f *testing.F) {
	f.Add([]byte(goodStatic))
	for _, seed := range []string{"", "services: []\n", "services:\n", "# x\n", "---\n",
		"services:\n  - name: a\n    endpoints: [{id: x, address: h, port: 1, health: sick}]\n",
		"services:\n  - name: a\n    endpoints: [{address: 10.0.0.1, port: 70000, draining: true, meta: {zone: z}}]\n",
		"services: &s\n  - name: a\n    endpoints: []\n", "service: []\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, err := ParseStatic(data)
		if len(bytes.TrimSpace(data)) == 0 && err == nil {
			t.Fatalf("blank file %q accepted", data)
		}
		if len(data) == 0 && !errors.Is(err, ErrNoServices) {
			t.Fatalf("empty file: %v, want ErrNoServices", err)
		}
		if err != nil {
			if raw != nil {
				t.Fatalf("services %v with error %v", raw, err)
			}
			return
		}
		snap, _ := Normalize(raw)
		if n := snap.EndpointCount(); n > len(data) {
			t.Fatalf("%d endpoints from %d bytes", n, len(data))
		}
		for i, svc := range snap.Services {
			if svc.Name == "" || (i > 0 && snap.Services[i-1].Name >= svc.Name) {
				t.Fatalf("services not named and sorted: %q", svc.Name)
			}
			for _, ep := range svc.Endpoints {
				if ep.ID == "" || ep.Address == "" || ep.Port < 1 || ep.Port > 65535 || ep.Meta == nil {
					t.Fatalf("invalid endpoint kept: %+v", ep)
				}
			}
		}
	})
}

// guardFuzzSnap builds the snapshot of one fuzz step: op's low nibble is
// how many instances a has, bits 4-6 how many b has; ids' low nibble
// shifts the ids of a (a-<shift+i>: a shift replaces instances), bit 4
// marks a's instances unhealthy, bit 5 b's.
func guardFuzzSnap(op, ids byte) Snapshot {
	s := snapOf("a", int(op&0x0f), "b", int(op>>4&0x07))
	for i := range s.Services[0].Endpoints {
		ep := &s.Services[0].Endpoints[i]
		ep.ID = fmt.Sprintf("a-%02d", int(ids&0x0f)+i)
	}
	for k, bit := range []byte{0x10, 0x20} {
		for i := range s.Services[k].Endpoints {
			if ids&bit != 0 {
				s.Services[k].Endpoints[i].Health = HealthUnhealthy
			}
		}
	}
	return s
}

// FuzzRemovalGuard drives the guard with snapshots built from fuzz bytes
// (three a step: op, ids, time; op with bit 7 set is a Due) and checks,
// against a history kept here: a snapshot is never applied and held whole
// at once; an applied snapshot holds every instance of the newest offered
// one as offered (additions and health changes are never held), and any
// other instance is one of a held service, as it was in the previous
// applied snapshot; a held service keeps every instance it had; a service hold lasts the hold period, no longer
// (unless a whole hold outlasts it); and no service applied in full (not
// held) has fewer than half of the most instances it had applied in full
// within the window (a loss of one instance aside) unless its hold has
// just expired.
func FuzzRemovalGuard(f *testing.F) {
	f.Add([]byte{10, 0, 10, 1, 0, 3, 200, 0, 0, 50})
	f.Add([]byte{0x3c, 0, 0, 0x3b, 0, 2, 0x3a, 0, 2, 0x39, 0, 2, 0x38, 0, 2, 0x37, 0x10, 2, 0x36, 0, 2, 0x35, 0, 2, 0x80, 0, 255, 0x80, 0, 255})
	f.Add([]byte{0x3c, 0, 0, 0x3c, 0x07, 8, 0x34, 0x27, 8, 0x0c, 0x17, 8, 0x80, 0, 255, 0x80, 0, 255})
	f.Fuzz(guardFuzzRun)
}

// guardFuzzRun is the body of FuzzRemovalGuard.
func guardFuzzRun(t *testing.T, steps []byte) {
	const window, hold = 60 * time.Second, 30 * time.Second
	g := NewRemovalGuard(0.5, hold, window)
	type applied struct {
		at    time.Time
		count int
	}
	hist := map[string][]applied{} // per service, counts applied in full since its last hold ended
	started := map[string]time.Time{}
	var offered, last Snapshot
	var now int64
	for i := 0; i+2 < len(steps); i += 3 {
		now += int64(steps[i+2]) * 1_000_000_000 / 8
		at := timeAt(now)
		var v Verdict
		if steps[i]&0x80 != 0 {
			v = g.Due(at)
		} else {
			offered = guardFuzzSnap(steps[i], steps[i+1])
			v = g.Offer(offered, at)
		}
		if v.Apply && v.Held {
			t.Fatal("applied and held whole at once")
		}
		held := map[string]bool{}
		for _, h := range v.Services {
			switch h.Event {
			case HoldStarted:
				started[h.Name] = at
				fallthrough
			case HoldKept:
				held[h.Name] = true
				if !h.Until.Equal(started[h.Name].Add(hold)) || (!v.Held && !at.Before(h.Until)) {
					t.Fatalf("%s held until %v, started %v, now %v", h.Name, h.Until, started[h.Name], at)
				}
			case HoldExpired:
				delete(hist, h.Name)
			}
		}
		if !v.Apply {
			continue
		}
		guardFuzzKept(t, offered, last, v.Snapshot, held)
		prev := last
		last = v.Snapshot
		if v.Expired {
			clear(hist)
		}
		for _, name := range []string{"a", "b"} {
			svc, _ := v.Snapshot.Service(name)
			if held[name] {
				continue
			}
			count := len(svc.Endpoints)
			if h := hist[name]; len(h) > 0 {
				peak := h[len(h)-1].count
				for _, e := range h {
					if !e.at.Before(at.Add(-window)) {
						peak = max(peak, e.count)
					}
				}
				if lost := peak - count; lost >= 2 && 2*lost > peak && prev.EndpointCount() > 0 {
					t.Fatalf("service %s: %d of a peak of %d removed at once (history %v)", name, lost, peak, h)
				}
			}
			hist[name] = append(hist[name], applied{at, count})
		}
	}
}

// guardFuzzKept checks an applied snapshot: sorted, every instance of the
// offered snapshot as offered, any other one of a held service as it was
// in the last applied snapshot, and no instance of a held service that
// the last applied snapshot had removed.
func guardFuzzKept(t *testing.T, offered, last, out Snapshot, held map[string]bool) {
	t.Helper()
	want, _ := instances(offered)
	before, _ := instances(last)
	got, _ := instances(out)
	for i, svc := range out.Services {
		if i > 0 && out.Services[i-1].Name >= svc.Name {
			t.Fatalf("services not sorted: %q after %q", svc.Name, out.Services[i-1].Name)
		}
		for j, ep := range svc.Endpoints {
			if j > 0 && svc.Endpoints[j-1].ID >= ep.ID {
				t.Fatalf("%s: endpoints not sorted: %q after %q", svc.Name, ep.ID, svc.Endpoints[j-1].ID)
			}
			if o, ok := want[svc.Name][ep.ID]; ok {
				if !o.Equal(ep) {
					t.Fatalf("%s/%s applied as %+v, offered as %+v", svc.Name, ep.ID, ep, o)
				}
				continue
			}
			if b, ok := before[svc.Name][ep.ID]; !ok || !b.Equal(ep) || !held[svc.Name] {
				t.Fatalf("%s/%s applied, not offered: held %v, before %+v (%v)", svc.Name, ep.ID, held[svc.Name], b, ok)
			}
		}
	}
	for name, ids := range want {
		for id := range ids {
			if _, ok := got[name][id]; !ok {
				t.Fatalf("%s/%s offered, not applied", name, id)
			}
		}
	}
	for name := range held {
		for id := range before[name] {
			if _, ok := got[name][id]; !ok {
				t.Fatalf("%s/%s removed while %s is held", name, id, name)
			}
		}
	}
}
