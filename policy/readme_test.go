package policy

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"
)

// TestReadmeFieldTable: the README's table names every field of the
// resolver, splitter and router entries (and their parts) in api v1.34.5,
// so a field is never supported or ignored without saying so.
func TestReadmeFieldTable(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "## Traffic policy from Consul config entries")
	if !ok {
		t.Fatal("README.md has no Traffic policy from Consul config entries section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	skip := map[string]bool{"Kind": true, "Name": true, "ModifyIndex": true, "Match": true, "HTTP": true, "Destination": true,
		"Routes": true, "Namespace": true, "Partition": true}
	for _, typ := range []reflect.Type{reflect.TypeFor[api.ServiceResolverConfigEntry](), reflect.TypeFor[api.ServiceResolverSubset](),
		reflect.TypeFor[api.ServiceResolverRedirect](), reflect.TypeFor[api.ServiceResolverFailover](), reflect.TypeFor[api.LoadBalancer](),
		reflect.TypeFor[api.ServiceSplitterConfigEntry](), reflect.TypeFor[api.ServiceSplit](), reflect.TypeFor[api.ServiceRouterConfigEntry](),
		reflect.TypeFor[api.ServiceRouteHTTPMatch](), reflect.TypeFor[api.ServiceRouteDestination]()} {
		for f := range typ.Fields() {
			if !skip[f.Name] && !strings.Contains(section, "`"+f.Name+"`") && !strings.Contains(section, "`"+f.Name+"[") &&
				!strings.Contains(section, "`"+f.Name+"/") && !strings.Contains(section, "/`"+f.Name+"`") {
				t.Errorf("the README's table does not name %s.%s", typ.Name(), f.Name)
			}
		}
	}
}
