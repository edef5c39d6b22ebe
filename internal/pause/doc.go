// Package pause owns the one context-aware sleep of this module: For
// waits a duration or until a context is done, whichever comes first, and
// says which; Until waits on an injected clock's channel the same way;
// Every runs a function on a ticker until a context is done. Retry loops,
// pacing and periodic work use them instead of a hand-rolled timer and
// select.
//
// pause must not import anything else in this module.
//
// imports_test.go enforces the import rules.
package pause
