package policy

import (
	"strings"
	"testing"
)

// TestFromFile converts file settings and checks each problem.
func TestFromFile(t *testing.T) {
	p, err := FromFile("web", FileService{
		Subsets:       map[string]FileSubset{"v2": {Filter: `Service.Meta.version == "2"`}, "all": {OnlyPassing: true}},
		DefaultSubset: "v2", Redirect: &Redirect{Service: "api", ServiceSubset: "v1"}, LBPolicy: "maglev",
		HashPolicies: []FileHashPolicy{{Field: "cookie", FieldValue: "session"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := p.Resolver
	if p.Service != "web" || r == nil || len(r.Subsets) != 2 || r.Subsets[0].Name != "all" || r.Subsets[0].Filter != nil ||
		!r.Subsets[0].OnlyPassing || r.Subsets[1].Filter.String() != `Service.Meta.version == "2"` ||
		*r.Redirect != (Redirect{Service: "api", ServiceSubset: "v1"}) || r.LoadBalancer.Policy != "maglev" ||
		r.LoadBalancer.HashPolicies[0].Field != "cookie" {
		t.Errorf("policy %+v, resolver %+v", p, r)
	}
	if p, err := FromFile("web", FileService{LBPolicy: "ring_hash"}); err != nil || !p.IsDefault() {
		t.Errorf("nothing set: %+v, %v", p, err)
	}
	for name, tc := range map[string]struct {
		f    FileService
		want string
	}{
		"bad filter":       {FileService{Subsets: map[string]FileSubset{"a": {Filter: "=="}}}, `subsets.a.filter: filter "=="`},
		"default unknown":  {FileService{DefaultSubset: "x"}, `default_subset: "x" is not one of`},
		"redirect itself":  {FileService{Redirect: &Redirect{Service: "WEB"}}, `redirect: "web" redirects to itself`},
		"redirect nothing": {FileService{Redirect: &Redirect{}}, `redirect: names neither`},
		"own subset":       {FileService{Redirect: &Redirect{ServiceSubset: "x"}}, `redirect.subset: "x" is not one of`},
		"subset name":      {FileService{Subsets: map[string]FileSubset{"v_1": {}}}, `subsets.v_1: is not a subset name`},
		"hash no ring":     {FileService{LBPolicy: "random", HashPolicies: []FileHashPolicy{{SourceIP: true}}}, `hash_policies: need lb_policy`},
		"hash no value":    {FileService{LBPolicy: "ring_hash", HashPolicies: []FileHashPolicy{{Field: "header"}}}, `hash_policies[0].field_value: is empty`},
	} {
		if _, err := FromFile("web", tc.f); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", name, err, tc.want)
		}
	}
	if _, err := FromFile("web", FileService{Subsets: map[string]FileSubset{"v1": {}}, Redirect: &Redirect{ServiceSubset: "v1"}}); err != nil {
		t.Errorf("redirect to an own subset: %v", err)
	}
}

// TestMerge checks the precedence rule: Consul's service-resolver wins
// whole over the file's; without one, the file's is used; other kinds
// come from the entries.
func TestMerge(t *testing.T) {
	file := Policy{Service: "web", Resolver: &Resolver{DefaultSubset: "file"}}
	entries := Policy{Service: "web", Protocol: "http", Resolver: &Resolver{DefaultSubset: "consul"},
		Splits: []Split{{Weight: 100}}, Entries: []EntryRef{{Kind: KindResolver, Name: "web"}}}
	if p, src := Merge(file, entries); src != SourceEntries || p.Resolver.DefaultSubset != "consul" || p.Protocol != "http" || len(p.Splits) != 1 {
		t.Errorf("both: %s %+v", src, p)
	}
	noResolver := entries
	noResolver.Resolver = nil
	if p, src := Merge(file, noResolver); src != SourceFile || p.Resolver.DefaultSubset != "file" || p.Protocol != "http" || len(p.Splits) != 1 {
		t.Errorf("file resolver: %s %+v", src, p)
	}
	if p, src := Merge(Policy{Service: "web"}, noResolver); src != SourceNone || p.Resolver != nil {
		t.Errorf("neither: %s %+v", src, p)
	}
}
