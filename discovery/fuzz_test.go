package discovery

import (
	"bytes"
	"errors"
	"testing"
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
// it never applies a snapshot that removes more than the fraction before
// the hold has passed, and a snapshot is held only while a hold runs.
func FuzzRemovalGuard(f *testing.F) {
	f.Add([]byte{10, 0, 10, 1, 3, 200, 0, 50})
	f.Fuzz(func(t *testing.T, steps []byte) {
		g := NewRemovalGuard(0.5, 30_000_000_000)
		var applied Snapshot
		var now int64
		for i := 0; i+1 < len(steps); i += 2 {
			now += int64(steps[i+1]) * 1_000_000_000 / 8
			at := timeAt(now)
			if steps[i]&0x80 != 0 {
				if v := g.Due(at); v.Apply {
					applied = v.Snapshot
				}
				continue
			}
			s := snapOf("a", int(steps[i]&0x0f), "b", int(steps[i]>>4&0x07))
			v := g.Offer(s, at)
			if v.Apply && v.Held {
				t.Fatal("applied and held at once")
			}
			if v.Apply && !v.Expired && applied.EndpointCount() > 0 && 2*v.Removed > applied.EndpointCount() {
				t.Fatalf("removal of %d of %d applied at once", v.Removed, applied.EndpointCount())
			}
			if v.Apply {
				applied = v.Snapshot
			}
		}
	})
}
