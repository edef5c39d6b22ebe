// Package logclip owns how a name from outside (the Consul catalog, the
// KV store, a request) is shortened for a log line: Name keeps at most
// MaxBytes bytes, cut at a rune boundary, and notes the full length, so
// that a hostile or broken name cannot flood the log; To does the same
// with another bound.
//
// logclip must not import anything else in this module.
//
// imports_test.go enforces the import rules.
package logclip
