package toolbin

import (
	"testing"

	"github.com/xds-server/xds-server/internal/importrules"
)

// TestImportRules: toolbin imports nothing else from this module.
func TestImportRules(t *testing.T) {
	importrules.Check(t, importrules.AnyInModule)
}
