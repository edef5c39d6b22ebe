// Package certs owns the TLS material of xds-server's listeners: server
// *tls.Config values built from PEM files (certificate, key, optional
// client CA for mTLS) that follow the files when they change, the identity
// of a verified peer (the URI and DNS SANs of its certificate), the glob
// matcher that authorization rules use, and small secret files (a bearer
// token) reloaded on change.
//
// certs must not import any other package of this module.
//
// imports_test.go enforces the import rules.
package certs
