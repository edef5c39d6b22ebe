package policy

import (
	"testing"

	"github.com/xds-server/xds-server/internal/importrules"
)

// TestImportRules enforces doc.go's import rules (design guide §3).
func TestImportRules(t *testing.T) {
	importrules.Check(t, "envoy", "xds", "xdscache", "translate", "discovery", "subsetting", "weights",
		"ratelimit", "config", "cmd")
}
