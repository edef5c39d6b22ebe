package consulstate

import (
	"testing"

	"github.com/xds-server/xds-server/internal/importrules"
)

// TestImportRules enforces doc.go's import rules (design guide §3).
func TestImportRules(t *testing.T) {
	importrules.Check(t, "discovery", "ha", "nodeindex", "xds", "xdscache", "translate", "weights", "drain", "envoy", "config", "cmd", "ratelimit", "console", "subsetting")
}
