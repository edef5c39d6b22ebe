package importrules

import "testing"

// TestImportRules: importrules imports nothing else from this module.
func TestImportRules(t *testing.T) {
	Check(t, AnyInModule)
}
