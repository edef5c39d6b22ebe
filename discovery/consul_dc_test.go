package discovery

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConsulDatacenterList(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  ConsulConfig
		want string
	}{
		"none: the agent's":   {want: ""},
		"datacenter alone":    {cfg: ConsulConfig{Datacenter: "dc1"}, want: "dc1"},
		"the list wins":       {cfg: ConsulConfig{Datacenter: "dc1", Datacenters: []string{"dc1", "dc3", "dc2"}}, want: "dc1,dc3,dc2"},
		"list without single": {cfg: ConsulConfig{Datacenters: []string{"dc2", "dc1"}}, want: "dc2,dc1"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := strings.Join(tc.cfg.datacenters(), ","); got != tc.want {
				t.Errorf("datacenters = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNewConsulDCs(t *testing.T) {
	dcs := newConsulDCs([]string{"dc1", "dc2"}, slog.Default())
	if dcs[0].prefix != "" || dcs[1].prefix != "dc2/" || dcs[0].label != "dc1" || dcs[1].label != "dc2" {
		t.Errorf("dcs = %+v %+v; want the local one unprefixed, dc2 with dc2/", *dcs[0], *dcs[1])
	}
	if one := newConsulDCs([]string{""}, slog.Default()); one[0].label != LocalDatacenterLabel || one[0].prefix != "" {
		t.Errorf("the agent's own datacenter = %+v, want label %q and no prefix", *one[0], LocalDatacenterLabel)
	}
}

func TestWithPrefix(t *testing.T) {
	eps := []Endpoint{{ID: "a"}, {ID: "n1/b"}}
	if got := withPrefix(eps, ""); got[0].ID != "a" || got[1].ID != "n1/b" {
		t.Errorf("no prefix changed ids: %+v", got)
	}
	if got := withPrefix(eps, "dc2/"); got[0].ID != "dc2/a" || got[1].ID != "dc2/n1/b" {
		t.Errorf("ids = %q, %q; want dc2/a, dc2/n1/b", got[0].ID, got[1].ID)
	}
}

func dcEp(id, addr string, port int, dc string) Endpoint {
	return Endpoint{ID: id, Address: addr, Port: port, Datacenter: dc}
}

func TestMergeDatacenters(t *testing.T) {
	local := []Endpoint{dcEp("web-1", "10.0.0.1", 80, "dc1"), dcEp("web-2", "10.0.0.2", 80, "dc1")}
	remote := []Endpoint{dcEp("dc2/a", "10.1.0.1", 80, "dc2"), dcEp("dc2/web-1", "10.1.0.2", 80, "dc2")}
	for name, tc := range map[string]struct {
		views    []map[string][]Endpoint
		want     string // service:id,id;service:...
		problems string // reasons, comma separated
	}{
		"one datacenter": {views: []map[string][]Endpoint{{"web": local, "api": {}}}, want: "api:;web:web-1,web-2"},
		"union sorted by id": {views: []map[string][]Endpoint{{"web": local}, {"web": remote}},
			want: "web:dc2/a,dc2/web-1,web-1,web-2"},
		"a service of the remote datacenter alone": {views: []map[string][]Endpoint{{"web": local}, {"only2": remote}},
			want: "only2:dc2/a,dc2/web-1;web:web-1,web-2"},
		"the earlier datacenter keeps a shared address": {
			views: []map[string][]Endpoint{{"web": local}, {"web": {dcEp("dc2/x", "10.0.0.2", 80, "dc2"), dcEp("dc2/y", "10.1.0.9", 80, "dc2")}}},
			want:  "web:dc2/y,web-1,web-2", problems: ReasonDuplicateAdr},
		"a clashing id is skipped": {
			views: []map[string][]Endpoint{{"web": {dcEp("dc2/a", "10.0.0.1", 80, "dc1")}}, {"web": remote}},
			want:  "web:dc2/a,dc2/web-1", problems: ReasonDuplicateID},
		"empty in both": {views: []map[string][]Endpoint{{"web": {}}, {"web": nil}}, want: "web:"},
	} {
		t.Run(name, func(t *testing.T) {
			svcs, problems := mergeDatacenters(tc.views)
			var parts []string
			for _, s := range svcs {
				if s.Endpoints == nil {
					t.Errorf("service %s has nil endpoints", s.Name)
				}
				ids := make([]string, len(s.Endpoints))
				for i, e := range s.Endpoints {
					ids[i] = e.ID
				}
				parts = append(parts, s.Name+":"+strings.Join(ids, ","))
			}
			if got := strings.Join(parts, ";"); got != tc.want {
				t.Errorf("services = %q, want %q", got, tc.want)
			}
			var reasons []string
			for _, p := range problems {
				reasons = append(reasons, p.Reason)
			}
			if got := strings.Join(reasons, ","); got != tc.problems {
				t.Errorf("problems = %q (%+v), want %q", got, problems, tc.problems)
			}
		})
	}
	if local[0].ID != "web-1" || remote[0].ID != "dc2/a" {
		t.Error("the views were modified")
	}
}

// TestConsulDCViewHeldWhileCatalogFails: what a datacenter shows follows
// its read services while its catalog loop answers, and stays as it was
// while that loop fails (a service loop may answer from a half-restored
// agent meanwhile).
func TestConsulDCViewHeldWhileCatalogFails(t *testing.T) {
	d := newConsulDCs([]string{"dc1"}, slog.Default())[0]
	d.catalogRead = true
	d.watches["web"] = &serviceWatch{read: true, endpoints: []Endpoint{dcEp("web-1", "10.0.0.1", 80, "dc1")}}
	d.watches["new"] = &serviceWatch{} // not read yet: not shown
	if v := d.view(); len(v) != 1 || len(v["web"]) != 1 || d.endpoints() != 1 {
		t.Fatalf("view = %v, want web with one endpoint", v)
	}
	d.failing[""] = true
	d.watches["web"].endpoints = []Endpoint{}
	if v := d.view(); len(v["web"]) != 1 || !d.stale() {
		t.Errorf("view while the catalog fails = %v, want the one shown before", v)
	}
	delete(d.failing, "")
	if v := d.view(); len(v["web"]) != 0 || d.stale() {
		t.Errorf("view after the catalog answers = %v, want web empty", v)
	}
}

// TestRemovalGuardAcrossDatacenters: the guard judges the union. When a
// restarted dc2 first answers with an empty catalog, web loses dc2's 3 of
// its 5 instances (of 11 in all): web's removals are held (dc2's endpoints
// kept by their prefixed ids) while dc1's change is applied at once.
func TestRemovalGuardAcrossDatacenters(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	dc1 := []Endpoint{dcEp("web-1", "10.0.0.1", 80, "dc1"), dcEp("web-2", "10.0.0.2", 80, "dc1")}
	dc2 := []Endpoint{dcEp("dc2/web-1", "10.1.0.1", 80, "dc2"), dcEp("dc2/web-2", "10.1.0.2", 80, "dc2"), dcEp("dc2/web-3", "10.1.0.3", 80, "dc2")}
	api := snapOf("api", 6).Services[0].Endpoints
	g := NewRemovalGuard(0.5, 30*time.Second, 0)
	svcs, _ := mergeDatacenters([]map[string][]Endpoint{{"web": dc1, "api": api}, {"web": dc2}})
	if v := g.Offer(Snapshot{Services: svcs}, t0); !v.Apply {
		t.Fatal("first snapshot not applied")
	}
	changed := slices.Clone(dc1)
	changed[0].Health = HealthUnhealthy
	svcs, _ = mergeDatacenters([]map[string][]Endpoint{{"web": changed, "api": api}, {}})
	v := g.Offer(Snapshot{Services: svcs}, t0.Add(time.Second))
	if !v.Apply || v.HeldServices() != 1 {
		t.Fatalf("verdict %+v: want applied with web's removals held", v)
	}
	wantIDs(t, v.Snapshot, "web", "dc2/web-1", "dc2/web-2", "dc2/web-3", "web-1", "web-2")
	sameAs(t, v.Snapshot, Snapshot{Services: svcs}, "web", "web-1")
}
