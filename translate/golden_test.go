package translate_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/translate/translatetest"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.out.yaml and testdata/policy/*.out.yaml from the current output")

const goldenDir = "testdata/golden"

// TestGolden translates every testdata/golden/<case>.in.yaml for its node
// (translate.Node) and compares the rendered resources with
// <case>.out.yaml, printing a line diff on a mismatch. -update rewrites
// the outputs.
func TestGolden(t *testing.T) {
	runGolden(t, goldenDir, 30, func(path string) ([]byte, string, error) {
		in, c, err := translatetest.Load(path)
		if err != nil {
			return nil, "", err
		}
		got, err := translatetest.Render(translate.Node(in))
		return got, c.Doc, err
	})
}

// runGolden renders every <dir>/<case>.in.yaml (render returns the
// output and the case's doc) and compares it with <case>.out.yaml, or
// rewrites that with -update; dir must hold at least min cases.
func runGolden(t *testing.T, dir string, min int, render func(path string) ([]byte, string, error)) {
	ins, err := filepath.Glob(filepath.Join(dir, "*.in.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) < min {
		t.Errorf("%d golden cases in %s, want at least %d", len(ins), dir, min)
	}
	for _, path := range ins {
		name := strings.TrimSuffix(filepath.Base(path), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			got, doc, err := render(path)
			if err != nil {
				t.Fatal(err)
			}
			if doc == "" {
				t.Error("the case has no doc: say what it shows")
			}
			outPath := filepath.Join(dir, name+".out.yaml")
			if *update {
				if err := os.WriteFile(outPath, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(outPath)
			if err != nil {
				t.Fatalf("%v (run go test ./translate -run Golden -update)", err)
			}
			if d := translatetest.Diff(string(want), string(got)); d != "" {
				t.Errorf("%s differs (-want +got; -update rewrites it):\n%s", outPath, d)
			}
		})
	}
}

// TestGoldenOrphans: every output has its input.
func TestGoldenOrphans(t *testing.T) {
	outs, err := filepath.Glob(filepath.Join(goldenDir, "*.out.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	policyOuts, err := filepath.Glob(filepath.Join("testdata/policy", "*.out.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, policyOuts...)
	for _, out := range outs {
		in := strings.TrimSuffix(out, ".out.yaml") + ".in.yaml"
		if _, err := os.Stat(in); err != nil {
			t.Errorf("%s has no input: %v", out, err)
		}
	}
}
