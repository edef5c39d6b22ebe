package xds

import (
	"testing"

	"github.com/xds-server/xds-server/internal/importrules"
)

// TestImportRules enforces doc.go's import rules (design guide §3).
func TestImportRules(t *testing.T) {
	importrules.Check(t, "cmd", "config", "weights", "github.com/spf13/viper")
}
