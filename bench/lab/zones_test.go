package main

import (
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xds-server/xds-server/config"
)

// TestZoneFleet: the --zones preset puts 4 of 10 backends and 6 of 12
// clients in zone a, so that zone a's clients ask 1.25 x util of its
// capacity and zone b's 0.83 x util, and the total rate is util x the
// total capacity.
func TestZoneFleet(t *testing.T) {
	o := defaultOptions()
	o.zonePreset()
	f := newZoneFleet(o)
	if got := strings.Join(f.backendZones, ""); got != "aaaabbbbbb" {
		t.Errorf("backend zones %q, want aaaabbbbbb", got)
	}
	if got := strings.Join(f.clientZones, ""); got != "aaaaaabbbbbb" {
		t.Errorf("client zones %q, want aaaaaabbbbbb", got)
	}
	total := 0.0
	for _, r := range f.rates {
		total += r
	}
	if want := o.util * zoneCapacity * 10; math.Abs(total-want) > 1e-9 {
		t.Errorf("total rate %v, want %v", total, want)
	}
	if a, b := f.demandOverCapacity(zoneA), f.demandOverCapacity(zoneB); math.Abs(a-1.0) > 1e-9 || math.Abs(b-0.8/1.2) > 1e-9 {
		t.Errorf("demand over capacity a %v b %v, want 1.0 and 0.667", a, b)
	}
	o.zoneShare = 0.99 // zone b keeps one backend
	if f := newZoneFleet(o); f.backendZones[len(f.backendZones)-1] != zoneB || f.backendZones[0] != zoneA {
		t.Errorf("zone share 0.99: %v, want zone b to keep a backend", f.backendZones)
	}
}

// TestZoneFigures: the in-zone share counts requests served in their
// client's zone (an unknown peer counts as out of zone), the zones'
// utilization is the mean of their backends', and the medians are over
// runs, errors summed.
func TestZoneFigures(t *testing.T) {
	share := inZoneShare(map[[2]string]int64{{"a", "a"}: 70, {"a", "b"}: 20, {"b", "b"}: 100, {"b", ""}: 10})
	if math.Abs(share-170.0/200) > 1e-12 {
		t.Errorf("in zone %v, want 0.85", share)
	}
	if inZoneShare(nil) != 0 {
		t.Error("in zone of nothing, want 0")
	}
	zu := zoneUtil([]float64{0.9, 0.7, 0.5, 0.6, 0.7}, []string{"a", "a", "b", "b", "b"})
	if math.Abs(zu["a"]-0.8) > 1e-12 || math.Abs(zu["b"]-0.6) > 1e-12 {
		t.Errorf("zone utilization %v, want a 0.8, b 0.6", zu)
	}
	runs := []zoneFigures{
		{InZone: 0.9, MaxMean: 1.2, ZoneUtil: map[string]float64{"a": 0.9}, Errors: 1, Requests: 10},
		{InZone: 0.7, MaxMean: 1.1, ZoneUtil: map[string]float64{"a": 0.7}, Errors: 0, Requests: 10},
		{InZone: 0.8, MaxMean: 1.3, ZoneUtil: map[string]float64{"a": 0.8}, Errors: 2, Requests: 10},
	}
	m := medianZoneFigures(runs)
	if m.InZone != 0.8 || m.MaxMean != 1.2 || m.ZoneUtil["a"] != 0.8 || m.Errors != 3 || m.Requests != 30 {
		t.Errorf("medians %+v, want in zone 0.8, max/mean 1.2, zone a 0.8, errors 3, requests 30", m)
	}
	for _, c := range []struct {
		f    zoneFigures
		want bool
	}{
		{zoneFigures{MaxMean: 1.15, InZone: 0.8}, true},
		{zoneFigures{MaxMean: 1.16, InZone: 0.95}, false},
		{zoneFigures{MaxMean: 1.01, InZone: 0.79}, false},
	} {
		if got := spillMeets(c.f); got != c.want {
			t.Errorf("spillMeets(%+v) = %v, want %v", c.f, got, c.want)
		}
	}
}

// TestZonePolicyConfigs: every zone policy's YAML loads in xds-server's
// config with the locality settings and weights the policy stands for.
func TestZonePolicyConfigs(t *testing.T) {
	o := defaultOptions()
	o.zonePreset()
	ps := zonePolicies(o)
	if len(ps) != 4 {
		t.Fatalf("%d zone policies, want 4", len(ps))
	}
	for _, p := range ps {
		path := filepath.Join(t.TempDir(), p.slug()+".yaml")
		if err := os.WriteFile(path, []byte(p.serverConfig("127.0.0.1:8500", o)), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, errs := config.Load(config.Sources{File: path})
		if len(errs) > 0 {
			t.Fatalf("%s: %v\n%s", p.name, errs, p.serverConfig("127.0.0.1:8500", o))
		}
		s := cfg.Services[service]
		t.Logf("%s: failover %v distribute %v spill %v weights %v lb %s", p.name, s.Locality.Failover, s.Locality.Distribute,
			s.Locality.Spill, s.Weights.Enabled, s.LBPolicy)
		if got := len(s.Locality.Failover) > 0; got != p.failover {
			t.Errorf("%s: failover %v, want set %v", p.name, s.Locality.Failover, p.failover)
		}
		if s.Locality.Distribute != p.distribute || s.Weights.Enabled != p.spill {
			t.Errorf("%s: distribute %v weights %v, want %v and %v", p.name, s.Locality.Distribute, s.Weights.Enabled, p.distribute, p.spill)
		}
	}
}

// TestZonesFlag: --zones applies the zone preset before the other flags,
// which override it; a zone share outside (0, 1) is refused.
func TestZonesFlag(t *testing.T) {
	o, err := parseOptions([]string{"--runs", "1", "--zones", "--only", "spill"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.zones || o.backends != 10 || o.clients != 12 || o.util != 0.8 || o.runs != 1 || o.only != "spill" {
		t.Errorf("options %+v, want the zone preset with runs 1 and only spill", o)
	}
	if ps := selectedZones(o); len(ps) != 1 || !ps[0].spill {
		t.Errorf("--only spill selects %v, want spill alone", ps)
	}
	if _, err := parseOptions([]string{"--zones", "--zone-share", "1"}, io.Discard); err == nil {
		t.Error("--zone-share 1 accepted, want an error")
	}
}
