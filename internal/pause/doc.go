// Package pause owns the one context-aware sleep of this module: For
// waits a duration or until a context is done, whichever comes first, and
// says which. Retry loops and pacing use it instead of a hand-rolled timer
// and select.
//
// pause must not import anything else in this module.
//
// imports_test.go enforces the import rules.
package pause
