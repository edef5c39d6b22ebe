package discovery

import (
	"bytes"
	"errors"
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

// FuzzRemovalGuard drives the guard with snapshots built from fuzz bytes:
// a snapshot is never applied and held at once, and none applied before
// its hold has passed leaves any service with less than half of the
// largest count it had within the window (a loss of one instance aside),
// checked against a history kept here.
func FuzzRemovalGuard(f *testing.F) {
	f.Add([]byte{10, 0, 10, 1, 3, 200, 0, 50})
	f.Add([]byte{0x3c, 0, 0x3b, 2, 0x3a, 2, 0x39, 2, 0x38, 2, 0x37, 2, 0x36, 2, 0x35, 2, 0x80, 255})
	const window = 60 * time.Second
	f.Fuzz(func(t *testing.T, steps []byte) {
		g := NewRemovalGuard(0.5, 30*time.Second, window)
		type applied struct {
			at     time.Time
			counts [2]int
		}
		var hist []applied // since the last hold ended
		var now int64
		for i := 0; i+1 < len(steps); i += 2 {
			now += int64(steps[i+1]) * 1_000_000_000 / 8
			at := timeAt(now)
			var v Verdict
			var counts [2]int
			if steps[i]&0x80 != 0 {
				v = g.Due(at)
				a, _ := v.Snapshot.Service("a")
				b, _ := v.Snapshot.Service("b")
				counts = [2]int{len(a.Endpoints), len(b.Endpoints)}
			} else {
				counts = [2]int{int(steps[i] & 0x0f), int(steps[i] >> 4 & 0x07)}
				v = g.Offer(snapOf("a", counts[0], "b", counts[1]), at)
			}
			if v.Apply && v.Held {
				t.Fatal("applied and held at once")
			}
			if !v.Apply {
				continue
			}
			if v.Expired {
				hist = hist[:0]
			}
			if n := len(hist); !v.Expired && n > 0 && hist[n-1].counts != [2]int{} {
				for s := range 2 {
					peak := hist[n-1].counts[s]
					for _, h := range hist {
						if !h.at.Before(at.Add(-window)) {
							peak = max(peak, h.counts[s])
						}
					}
					if lost := peak - counts[s]; lost >= 2 && 2*lost > peak {
						t.Fatalf("service %d: %d of a peak of %d removed at once (history %v)", s, lost, peak, hist)
					}
				}
			}
			hist = append(hist, applied{at, counts})
		}
	})
}
