package console

import (
	"testing"

	"github.com/xds-server/xds-server/internal/importrules"
)

// TestImportRules enforces doc.go's import rules.
func TestImportRules(t *testing.T) {
	importrules.Check(t, "cmd", "config", "envoy")
}
