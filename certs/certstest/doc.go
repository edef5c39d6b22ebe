// Package certstest generates certificate authorities and certificates
// at test time (crypto/x509, ECDSA P-256) and writes them as PEM files, so
// that no private key is ever checked in. For tests only.
//
// certstest must not import any other package of this module.
//
// imports_test.go enforces the import rules.
package certstest
