package policy

import (
	"strings"
	"testing"
)

func inst(id string, tags []string, meta map[string]string) Instance {
	return Instance{Node: InstanceNode{Node: "n1", Datacenter: "dc1"},
		Service: InstanceService{ID: id, Service: "web", Address: "10.0.0.1", Port: 8080, Tags: tags, Meta: meta}}
}

func TestFilterMatch(t *testing.T) {
	v1 := inst("web-1", []string{"blue"}, map[string]string{"version": "v1"})
	v2 := inst("web-2", []string{"canary", "green"}, map[string]string{"version": "v2", "zone": "z1"})
	bare := inst("web-3", nil, nil)
	for _, tc := range []struct {
		expr string
		want [3]bool // v1, v2, bare
	}{
		{`Service.Meta.version == v1`, [3]bool{true, false, false}},
		{`Service.Meta.version == "v2"`, [3]bool{false, true, false}},
		{`Service.Meta.version != v1`, [3]bool{false, true, true}},
		{`Service.Tags contains canary`, [3]bool{false, true, false}},
		{`canary in Service.Tags`, [3]bool{false, true, false}},
		{`Service.Tags is empty`, [3]bool{false, false, true}},
		{`Service.Meta.zone is not empty and Service.Meta.version == v2`, [3]bool{false, true, false}},
		{`Service.Meta.version == v1 or Service.ID == "web-3"`, [3]bool{true, false, true}},
		{`not (Service.Meta.version == v1)`, [3]bool{false, true, true}},
		{`Service.Port == 8080 and Node.Datacenter == dc1`, [3]bool{true, true, true}},
		{`Service.ID matches "^web-[12]$"`, [3]bool{true, true, false}},
		{`all Service.Tags as t { t != "canary" }`, [3]bool{true, false, true}},
		{`Node.Node == n1`, [3]bool{true, true, true}},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			f, err := CompileFilter(tc.expr)
			if err != nil {
				t.Fatalf("CompileFilter: %v", err)
			}
			for i, in := range []Instance{v1, v2, bare} {
				if got := f.Match(in); got != tc.want[i] {
					t.Errorf("Match(%s) = %v, want %v", in.Service.ID, got, tc.want[i])
				}
			}
		})
	}
}

func TestFilterRejects(t *testing.T) {
	for expr, want := range map[string]string{
		``:                                  "empty",
		`Service.Meta.version ==`:           "version",
		`Service.Meta.version = v1`:         "policy: filter",
		`Node.Meta.rack == r1`:              `selector "Node.Meta.rack" is not supported`,
		`Checks.Status == passing`:          `selector "Checks.Status" is not supported`,
		`Service.Weights.Passing == 1`:      `"Service.Weights.Passing" is not supported`,
		`Service.Meta.a.b == x`:             "is not supported",
		`Service.ID == a or Node.ID == b`:   `"Node.ID"`,
		`all Checks as c { c.Status == x }`: `"Checks"`,
		"all Service.Tags as t { " + strings.Repeat("t == a or ", 64) + "t == b }": "more than 64 terms",
		strings.Repeat("x", MaxFilterBytes+1):                                      "bytes",
	} {
		_, err := CompileFilter(expr)
		if err == nil {
			t.Errorf("CompileFilter(%.40q) = nil error, want one", expr)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("CompileFilter(%.40q) = %v, want it to say %q", expr, err, want)
		}
	}
}

func TestNilFilterMatchesAll(t *testing.T) {
	var f *Filter
	if !f.Match(inst("a", nil, nil)) {
		t.Error("nil filter did not match")
	}
}
