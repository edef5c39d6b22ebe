// Package importrules enforces the package rules of the design guide (§3)
// in tests: each package's imports_test.go lists what it must not import
// and calls Check.
//
// importrules must not import anything else in this module.
//
// imports_test.go enforces the import rules.
package importrules
