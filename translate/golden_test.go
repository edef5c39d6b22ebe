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

var update = flag.Bool("update", false, "rewrite testdata/golden/*.out.yaml from the current output")

const goldenDir = "testdata/golden"

// TestGolden translates every testdata/golden/<case>.in.yaml for its node
// (translate.Node) and compares the rendered resources with
// <case>.out.yaml, printing a line diff on a mismatch. -update rewrites
// the outputs.
func TestGolden(t *testing.T) {
	ins, err := filepath.Glob(filepath.Join(goldenDir, "*.in.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) < 30 {
		t.Errorf("%d golden cases, want at least 30", len(ins))
	}
	for _, path := range ins {
		name := strings.TrimSuffix(filepath.Base(path), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			in, c, err := translatetest.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if c.Doc == "" {
				t.Error("the case has no doc: say what it shows")
			}
			got, err := translatetest.Render(translate.Node(in))
			if err != nil {
				t.Fatal(err)
			}
			outPath := filepath.Join(goldenDir, name+".out.yaml")
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
	for _, out := range outs {
		in := strings.TrimSuffix(out, ".out.yaml") + ".in.yaml"
		if _, err := os.Stat(in); err != nil {
			t.Errorf("%s has no input: %v", out, err)
		}
	}
}
