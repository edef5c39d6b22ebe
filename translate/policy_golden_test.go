package translate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/translate/translatetest"
)

const policyDir = "testdata/policy"

// TestPolicyGolden translates every testdata/policy/<case>.in.yaml with
// translate.PolicyService and compares the rendered resources with
// <case>.out.yaml; -update rewrites the outputs.
func TestPolicyGolden(t *testing.T) {
	ins, err := filepath.Glob(filepath.Join(policyDir, "*.in.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) < 8 {
		t.Errorf("%d policy golden cases, want at least 8", len(ins))
	}
	for _, path := range ins {
		name := strings.TrimSuffix(filepath.Base(path), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			in, c, err := translatetest.LoadPolicy(path)
			if err != nil {
				t.Fatal(err)
			}
			if c.Doc == "" {
				t.Error("the case has no doc: say what it shows")
			}
			got, err := translatetest.RenderPolicy(translate.PolicyService(in.Service, in.Settings, in.Policy, in.Demanded))
			if err != nil {
				t.Fatal(err)
			}
			outPath := filepath.Join(policyDir, name+".out.yaml")
			if *update {
				if err := os.WriteFile(outPath, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(outPath)
			if err != nil {
				t.Fatalf("%v (run go test ./translate -run PolicyGolden -update)", err)
			}
			if d := translatetest.Diff(string(want), string(got)); d != "" {
				t.Errorf("%s differs (-want +got; -update rewrites it):\n%s", outPath, d)
			}
		})
	}
}
