package discovery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

const goodStatic = `
services:
  - name: b
    endpoints:
      - { id: b-2, address: 10.0.0.2, port: 80, zone: z2 }
      - { id: b-1, address: 10.0.0.1, port: 80, zone: z1, health: draining, weight: 3 }
  - name: a
    endpoints:
      - { address: 10.0.0.9, port: 9000, tags: ["zone=z9"] }
`

func TestParseStatic(t *testing.T) {
	raw, err := ParseStatic([]byte(goodStatic))
	if err != nil {
		t.Fatal(err)
	}
	snap, problems := Normalize(raw)
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	if got := []string{snap.Services[0].Name, snap.Services[1].Name}; got[0] != "a" || got[1] != "b" {
		t.Fatalf("services not sorted: %v", got)
	}
	a := snap.Services[0].Endpoints[0]
	if a.ID != "10.0.0.9:9000" || a.Locality.Zone != "z9" || a.Health != HealthHealthy {
		t.Errorf("defaults: got %+v", a)
	}
	b := snap.Services[1].Endpoints
	if b[0].ID != "b-1" || b[0].Health != HealthDraining || b[0].Weight != 3 || b[0].Locality.Zone != "z1" {
		t.Errorf("b-1: got %+v", b[0])
	}
}

func TestParseStaticErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want string
	}{
		"unknown key":    {"services:\n  - name: a\n    endpionts: []\n", "endpionts"},
		"bad health":     {"services:\n  - name: a\n    endpoints: [{id: x, address: h, port: 1, health: sick}]\n", "sick"},
		"not a list":     {"services: 3\n", "cannot unmarshal"},
		"top-level typo": {"service: []\n", "service"},
		"empty file":     {"", "no services key"},
		"only a comment": {"# nothing yet\n\n", "no services key"},
		"services null":  {"services:\n", "no services key"},
		"document end":   {"---\n", "no services key"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseStatic([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestParseStaticEmptyList(t *testing.T) {
	raw, err := ParseStatic([]byte("services: []\n"))
	if err != nil || len(raw) != 0 {
		t.Fatalf("services: [] = %v, %v; want no services and no error", raw, err)
	}
}

func TestStaticEmbedded(t *testing.T) {
	s, err := NewStatic(StaticConfig{Embedded: []byte(goodStatic)})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Snapshot().EndpointCount(); n != 3 {
		t.Fatalf("endpoints = %d, want 3", n)
	}
}

func TestStaticBadInitialFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "e.yaml")
	if err := os.WriteFile(p, []byte("nope: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewStatic(StaticConfig{File: p}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("err = %v, want a parse error naming the key", err)
	}
	if _, err := NewStatic(StaticConfig{File: filepath.Join(dir, "missing.yaml")}); err == nil {
		t.Fatal("missing file accepted")
	}
}

// TestStaticReload edits the file under a running source: a good edit is
// emitted, a bad edit is reported and the previous contents stay, and a
// later good edit is picked up again.
func TestStaticReload(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "endpoints.yaml")
	write := func(s string) {
		t.Helper()
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p); err != nil {
			t.Fatal(err)
		}
	}
	write(goodStatic)
	m := NewMetrics(nil)
	reloads := make(chan error, 10)
	s, err := NewStatic(StaticConfig{File: p, PollInterval: 5 * time.Millisecond, Metrics: m,
		OnReload: func(err error) { reloads <- err }})
	if err != nil {
		t.Fatal(err)
	}
	snaps := make(chan Snapshot, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx, func(s Snapshot) { snaps <- s }) }()
	defer func() { cancel(); <-done }()

	first := awaitStatic(t, snaps)
	if first.EndpointCount() != 3 {
		t.Fatalf("first snapshot has %d endpoints", first.EndpointCount())
	}

	write(goodStatic + "  - name: c\n    endpoints: [{id: c-1, address: 10.0.0.3, port: 81}]\n")
	if err := awaitStatic(t, reloads); err != nil {
		t.Fatalf("good edit rejected: %v", err)
	}
	if got := awaitStatic(t, snaps); len(got.Services) != 3 {
		t.Fatalf("after edit: %d services, want 3", len(got.Services))
	}

	write("services: [ {name: broken\n")
	if err := awaitStatic(t, reloads); err == nil {
		t.Fatal("bad edit accepted")
	}
	if got := testutil.ToFloat64(m.Reloads.WithLabelValues("error")); got != 1 {
		t.Errorf("reload errors metric = %v, want 1", got)
	}
	if got := s.Snapshot(); len(got.Services) != 3 {
		t.Fatalf("bad edit changed the contents: %d services", len(got.Services))
	}

	write("services:\n  - name: only\n    endpoints: [{id: o, address: 10.0.0.4, port: 82}]\n")
	if err := awaitStatic(t, reloads); err != nil {
		t.Fatalf("recovery edit rejected: %v", err)
	}
	if got := awaitStatic(t, snaps); len(got.Services) != 1 || got.Services[0].Name != "only" {
		t.Fatalf("after recovery: %+v", got)
	}
	select {
	case extra := <-snaps:
		t.Fatalf("unexpected extra snapshot %+v (the bad edit must not emit)", extra)
	default:
	}
}

// TestStaticTruncated truncates the file of a running source to 0 bytes,
// as a crashed editor or a failed copy does: the reload is rejected and
// counted, nothing is emitted, and every endpoint stays as it was.
func TestStaticTruncated(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "endpoints.yaml")
	if err := os.WriteFile(p, []byte(goodStatic), 0o600); err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(nil)
	reloads := make(chan error, 10)
	s, err := NewStatic(StaticConfig{File: p, PollInterval: 5 * time.Millisecond, Metrics: m,
		OnReload: func(err error) { reloads <- err }})
	if err != nil {
		t.Fatal(err)
	}
	snaps := make(chan Snapshot, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx, func(s Snapshot) { snaps <- s }) }()
	defer func() { cancel(); <-done }()
	before := awaitStatic(t, snaps)

	if err := os.Truncate(p, 0); err != nil {
		t.Fatal(err)
	}
	if err := awaitStatic(t, reloads); !errors.Is(err, ErrNoServices) {
		t.Fatalf("reload of the truncated file: %v, want ErrNoServices", err)
	}
	if got := testutil.ToFloat64(m.Reloads.WithLabelValues("error")); got != 1 {
		t.Errorf("reload errors = %v, want 1", got)
	}
	if got := s.Snapshot(); !got.Equal(before) || got.EndpointCount() != 3 {
		t.Errorf("contents after truncation: %+v, want the previous ones", got)
	}
	select {
	case extra := <-snaps:
		t.Fatalf("the truncated file emitted %+v", extra)
	default:
	}
}

func awaitStatic[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for an event")
		panic("unreachable")
	}
}

// TestStaticDatacenterFromMeta: the static source's endpoints have no
// datacenter unless their meta "datacenter" names one, which is then also
// the default region.
func TestStaticDatacenterFromMeta(t *testing.T) {
	svcs, err := ParseStatic([]byte(`services:
- name: web
  endpoints:
  - {id: a, address: 10.0.0.1, port: 80, meta: {datacenter: dc2}}
  - {id: b, address: 10.0.0.2, port: 80, region: eu, meta: {datacenter: dc2}}
  - {id: c, address: 10.0.0.3, port: 80}
`))
	if err != nil {
		t.Fatal(err)
	}
	eps := svcs[0].Endpoints
	if eps[0].Datacenter != "dc2" || eps[0].Locality.Region != "dc2" || eps[1].Datacenter != "dc2" || eps[1].Locality.Region != "eu" ||
		eps[2].Datacenter != "" || eps[2].Locality.Region != "" {
		t.Errorf("endpoints = %+v; want a and b in dc2 (regions dc2, eu), c in none", eps)
	}
}
