package translate_test

import (
	"testing"

	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/translate/translatetest"
)

// TestPolicyGolden translates every testdata/policy/<case>.in.yaml with
// translate.PolicyService and compares the rendered resources with
// <case>.out.yaml; -update rewrites the outputs.
func TestPolicyGolden(t *testing.T) {
	runGolden(t, "testdata/policy", 8, func(path string) ([]byte, string, error) {
		in, c, err := translatetest.LoadPolicy(path)
		if err != nil {
			return nil, "", err
		}
		got, err := translatetest.RenderPolicy(translate.PolicyService(in.Service, in.Settings, in.Policy, in.Demanded))
		return got, c.Doc, err
	})
}
