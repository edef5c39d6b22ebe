package discovery

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeStaticSchema: the README's static endpoints file example
// lists every field the loader reads (staticFile and below).
func TestReadmeStaticSchema(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "### Static endpoints file")
	if !ok {
		t.Fatal(`README.md has no "### Static endpoints file" section`)
	}
	_, block, _ := strings.Cut(section, "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	svcs, err := ParseStatic([]byte(block))
	if err != nil || len(svcs) != 1 || len(svcs[0].Endpoints) != 1 || svcs[0].Endpoints[0].Locality.SubZone != "rack-1" {
		t.Errorf("the README's example does not load: %v %+v", err, svcs)
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[staticFile](), reflect.TypeFor[staticService](), reflect.TypeFor[staticEndpoint]()} {
		for f := range typ.Fields() {
			tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			if !regexp.MustCompile(`(?m)^\s*(- )?` + regexp.QuoteMeta(tag) + `:`).MatchString(block) {
				t.Errorf("the README's static file example does not show %s.%s (%q)", typ.Name(), f.Name, tag)
			}
		}
	}
}
