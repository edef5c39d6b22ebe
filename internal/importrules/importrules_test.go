package importrules

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestForbids(t *testing.T) {
	const own = Module + "/subsetting"
	for name, tc := range map[string]struct {
		forbidden []string
		path      string
		want      bool
	}{
		"module package":           {forbidden: []string{"xds"}, path: Module + "/xds", want: true},
		"its subpackage":           {forbidden: []string{"e2e"}, path: Module + "/e2e/harness", want: true},
		"a prefix is not a parent": {forbidden: []string{"xds"}, path: Module + "/xdsx"},
		"other module package":     {forbidden: []string{"xds"}, path: Module + "/envoy"},
		"external path":            {forbidden: []string{"github.com/spf13/viper"}, path: "github.com/spf13/viper", want: true},
		"standard library":         {forbidden: []string{AnyInModule}, path: "strings"},
		"any in module":            {forbidden: []string{AnyInModule}, path: Module + "/weights", want: true},
		"itself":                   {forbidden: []string{AnyInModule}, path: own},
		"its own subpackage":       {forbidden: []string{AnyInModule}, path: own + "/testdata"},
		"any but internal":         {forbidden: []string{AnyButInternal}, path: Module + "/weights", want: true},
		"an internal package":      {forbidden: []string{AnyButInternal}, path: Module + "/internal/freeport"},
		"internal under any":       {forbidden: []string{AnyInModule}, path: Module + "/internal/freeport", want: true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := forbids(tc.forbidden, tc.path, own); got != tc.want {
				t.Errorf("forbids(%v, %s) = %v, want %v", tc.forbidden, tc.path, got, tc.want)
			}
		})
	}
}

func TestViolations(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.go", "package p\n\nimport (\n\t\"strings\"\n\n\t\""+Module+"/xds\"\n)\n")
	write("a_test.go", "package p\n\nimport _ \""+Module+"/envoy\"\n")
	bad, err := Violations(dir, []string{"xds", "envoy"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.go imports " + Module + "/xds"}; !slices.Equal(bad, want) {
		t.Errorf("Violations = %q, want %q (test files are not checked)", bad, want)
	}
}

func TestOwnPath(t *testing.T) {
	if got := ownPath("."); got != Module+"/internal/importrules" {
		t.Errorf("ownPath(.) = %q", got)
	}
}
