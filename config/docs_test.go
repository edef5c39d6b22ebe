package config

import (
	"bytes"
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the README's key table and examples/xds-server.yaml from the key table")

const (
	readme      = "../README.md"
	exampleFile = "../examples/xds-server.yaml"
	tableBegin  = "<!-- config-keys:begin (generated: go test ./config -run TestDocs -update) -->\n"
	tableEnd    = "<!-- config-keys:end -->\n"
)

// TestDocs keeps the three views of the key table in step: the README's
// table and examples/xds-server.yaml are generated from it (-update
// rewrites them), and --help lists every flag key with its default.
func TestDocs(t *testing.T) {
	doc, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := bytes.Cut(doc, []byte(tableBegin))
	_, after, ok2 := bytes.Cut(rest, []byte(tableEnd))
	if !ok || !ok2 {
		t.Fatalf("%s lacks the markers %q and %q", readme, tableBegin, tableEnd)
	}
	want := string(before) + tableBegin + MarkdownTable() + tableEnd + string(after)
	check(t, readme, string(doc), want)

	example, err := os.ReadFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	check(t, exampleFile, string(example), ExampleYAML())

	var help bytes.Buffer
	PrintFlags(&help)
	for _, key := range Keys {
		line := "  --" + key.Name
		if key.FileOnly() {
			if strings.Contains(help.String(), line) {
				t.Errorf("--help lists the file-only key %s", key.Name)
			}
			continue
		}
		if !strings.Contains(help.String(), line+" ") && !strings.Contains(help.String(), line+"\n") {
			t.Errorf("--help does not list --%s", key.Name)
		}
		if d := key.DefaultText(); d != "" && d != "[]" && !strings.Contains(help.String(), "(default "+d+")") {
			t.Errorf("--help does not show the default of --%s (%s)", key.Name, d)
		}
		if !strings.Contains(MarkdownTable(), "| `"+key.Name+"` |") {
			t.Errorf("the README table lacks %s", key.Name)
		}
		if !strings.Contains(ExampleYAML(), lastPart(key.Name)+":") {
			t.Errorf("the example lacks %s", key.Name)
		}
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "#") {
			anchors[slug(strings.TrimLeft(line, "# "))] = true
		}
	}
	for _, key := range Keys {
		if key.Doc != "" && !anchors[key.Doc] {
			t.Errorf("%s: README has no section #%s", key.Name, key.Doc)
		}
	}
	if strings.Contains(help.String(), "`") {
		t.Error("--help has backticks (pflag reads them as value names)")
	}
}

// slug is GitHub's anchor of a heading.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func lastPart(name string) string { return name[strings.LastIndexByte(name, '.')+1:] }

func check(t *testing.T, path, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is out of date with the key table: run go test ./config -run TestDocs -update", path)
}

// TestExampleIsTheDefaults loads examples/xds-server.yaml: it is valid
// and equal to the defaults.
func TestExampleIsTheDefaults(t *testing.T) {
	cfg, errs := Load(Sources{File: exampleFile})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	def, errs := Load(Sources{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if !reflect.DeepEqual(cfg, def) {
		t.Errorf("examples/xds-server.yaml differs from the defaults:\n file     %+v\n defaults %+v", cfg, def)
	}
}
