// Package httpjson owns the one way this module's HTTP handlers answer
// with JSON: Write (indented by two spaces: the admin and debug
// endpoints) and WriteCompact (one line: the report push endpoint and the
// console's live updates). Both set Content-Type: application/json and
// X-Content-Type-Options: nosniff, then the status code, then the body;
// an encoding or write error is dropped (the client went away).
//
// httpjson must not import anything else in this module.
//
// imports_test.go enforces the import rules.
package httpjson
