package policy

import (
	"testing"

	"github.com/hashicorp/consul/api"
)

// FuzzCompileFilter: any expression is compiled or refused without a
// panic, and a compiled one evaluates on any instance without one.
func FuzzCompileFilter(f *testing.F) {
	for _, s := range []string{`Service.Meta.version == v1`, `Service.Tags contains canary`, `not (Node.Node == a)`,
		`all Service.Tags as t { t != "x" }`, `Service.Port > 1`, `Node.Meta.rack == r1`, `(`, `Service.Meta["a.b"] == x`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		flt, err := CompileFilter(expr)
		if err != nil {
			return
		}
		flt.Match(inst("a", []string{"canary"}, map[string]string{"version": "v1", "a.b": "x"}))
		flt.Match(Instance{})
	})
}

// FuzzParseEntry: a config entry decoded from any JSON by Consul's own
// decoder is parsed or rejected with a field and a reason, never a panic,
// and a Set takes it either way.
func FuzzParseEntry(f *testing.F) {
	for _, s := range []string{
		`{"Kind":"service-resolver","Name":"web","DefaultSubset":"v1","Subsets":{"v1":{"Filter":"Service.Meta.version == v1"}},"ConnectTimeout":"5s"}`,
		`{"Kind":"service-splitter","Name":"web","Splits":[{"Weight":90,"ServiceSubset":"v1"},{"Weight":10,"ServiceSubset":"v2"}]}`,
		`{"Kind":"service-router","Name":"web","Routes":[{"Match":{"HTTP":{"PathPrefix":"/a","Header":[{"Name":"x","Regex":"a+"}]}},"Destination":{"NumRetries":2}}]}`,
		`{"Kind":"service-defaults","Name":"web","Protocol":"grpc"}`,
		`{"Kind":"service-resolver","Name":"web","LoadBalancer":{"Policy":"ring_hash","HashPolicies":[{"Field":"header","FieldValue":"x"}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ce, err := api.DecodeConfigEntryFromJSON(data)
		if err != nil || ce == nil {
			return
		}
		e, rej := Parse(ce)
		if rej != nil {
			if rej.Field == "" || rej.Reason == "" {
				t.Fatalf("rejection without field or reason: %+v", rej)
			}
		} else if e.Resolver != nil {
			for _, s := range e.Resolver.Subsets {
				s.Filter.Match(inst("a", nil, nil))
			}
		}
		NewSet().Apply(ce.GetKind(), []api.ConfigEntry{ce})
	})
}
