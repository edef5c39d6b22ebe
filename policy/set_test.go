package policy

import (
	"slices"
	"testing"

	"github.com/hashicorp/consul/api"
)

func TestSetKeepsLastGoodAndDeletes(t *testing.T) {
	s := NewSet()
	if p := s.Policy("web"); !p.IsDefault() {
		t.Fatalf("empty set: %+v", p)
	}
	up := s.Apply(KindResolver, []api.ConfigEntry{resolver("web", nil), resolver("api", nil)})
	if !slices.Equal(up.Changed, []string{"api", "web"}) || len(up.Rejected) != 0 {
		t.Fatalf("first apply = %+v", up)
	}
	s.Apply(KindDefaults, []api.ConfigEntry{&api.ServiceConfigEntry{Kind: KindDefaults, Name: "web", Protocol: "http", ModifyIndex: 5}})
	p := s.Policy("web")
	if p.Protocol != "http" || p.Resolver == nil || p.Resolver.DefaultSubset != "v1" || len(p.Entries) != 2 {
		t.Fatalf("web = %+v", p)
	}

	// A bad version of web's resolver: the last good one stays, reported once.
	bad := resolver("web", func(r *api.ServiceResolverConfigEntry) {
		r.ModifyIndex = 20
		r.Subsets["v2"] = api.ServiceResolverSubset{Filter: "Node.Meta.rack == r1"}
	})
	up = s.Apply(KindResolver, []api.ConfigEntry{bad, resolver("api", nil)})
	if len(up.Changed) != 0 || len(up.Rejected) != 1 || up.Rejected[0].Name != "web" || up.Rejected[0].ModifyIndex != 20 {
		t.Fatalf("bad apply = %+v", up)
	}
	if p := s.Policy("web"); p.Resolver == nil || p.Entries[1].ModifyIndex != 10 {
		t.Errorf("web after a bad version = %+v, want the last good resolver (index 10)", p)
	}
	if rs := s.Rejections(); len(rs) != 1 || rs[0].Field != "Subsets[v2].Filter" {
		t.Errorf("rejections = %+v", rs)
	}
	// The same bad version read again (another entry of the kind changed): not counted again.
	if up = s.Apply(KindResolver, []api.ConfigEntry{bad}); len(up.Rejected) != 0 || !slices.Equal(up.Changed, []string{"api"}) {
		t.Errorf("re-read = %+v, want api deleted and no new rejection", up)
	}

	// Fixed: used, the rejection cleared.
	up = s.Apply(KindResolver, []api.ConfigEntry{resolver("web", func(r *api.ServiceResolverConfigEntry) { r.ModifyIndex = 30 })})
	if !slices.Equal(up.Changed, []string{"web"}) || len(s.Rejections()) != 0 {
		t.Errorf("fixed = %+v, rejections %+v", up, s.Rejections())
	}

	// Deleted: back to defaults for that kind; the rejection of a deleted entry goes too.
	s.Apply(KindResolver, []api.ConfigEntry{bad})
	up = s.Apply(KindResolver, nil)
	if !slices.Equal(up.Changed, []string{"web"}) || s.Policy("web").Resolver != nil || len(s.Rejections()) != 0 {
		t.Errorf("deleted = %+v, web %+v, rejections %+v", up, s.Policy("web"), s.Rejections())
	}
	if got := s.Services(); !slices.Equal(got, []string{"web"}) { // service-defaults remains
		t.Errorf("services = %v", got)
	}
}

func TestSetBounds(t *testing.T) {
	s := NewSet()
	var entries []api.ConfigEntry
	for i := range MaxEntriesPerKind + 3 {
		entries = append(entries, &api.ServiceConfigEntry{Kind: KindDefaults, Name: string(rune('a'+i%26)) + string(rune(0x100+i)), Protocol: "http"})
	}
	up := s.Apply(KindDefaults, entries)
	if n := s.Counts()[KindDefaults]; n != MaxEntriesPerKind || len(up.Rejected) != 3 || up.Rejected[0].Reason != ReasonTooMany {
		t.Errorf("kept %d, rejected %d (%+v)", n, len(up.Rejected), up.Rejected[:min(1, len(up.Rejected))])
	}
	// A kind not read is ignored; an entry listed under another kind is rejected.
	if up := s.Apply("mesh", entries); len(up.Changed)+len(up.Rejected) != 0 {
		t.Errorf("unknown kind applied: %+v", up)
	}
	if up := s.Apply(KindRouter, []api.ConfigEntry{resolver("x", nil)}); len(up.Rejected) != 1 || up.Rejected[0].Reason != ReasonBadKind {
		t.Errorf("misfiled entry = %+v", up)
	}
}
