package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"
)

// DefaultExpiryWarning is how long before its certificate expires a
// listener warns, when nothing else is configured.
const DefaultExpiryWarning = 14 * 24 * time.Hour

// Errors of CheckValidity (wrapped).
var (
	ErrExpired     = errors.New("certificate has expired")
	ErrNotYetValid = errors.New("certificate is not valid yet")
)

// CheckValidity reports a leaf certificate outside its validity period
// at now (ErrExpired or ErrNotYetValid, with the dates); nil inside it.
func CheckValidity(leaf *x509.Certificate, now time.Time) error {
	switch {
	case leaf == nil:
		return errors.New("certs: no certificate")
	case now.After(leaf.NotAfter):
		return fmt.Errorf("certs: %w: not after %s (%s ago); serial %s",
			ErrExpired, leaf.NotAfter.UTC().Format(time.RFC3339), roundAge(now.Sub(leaf.NotAfter)), leaf.SerialNumber)
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("certs: %w: not before %s (in %s); serial %s",
			ErrNotYetValid, leaf.NotBefore.UTC().Format(time.RFC3339), roundAge(leaf.NotBefore.Sub(now)), leaf.SerialNumber)
	}
	return nil
}

// CheckPair loads a certificate chain and its key as a listener would
// and reports a pair that does not load or whose leaf is outside its
// validity period at now; with warn > 0 it also returns, as remaining,
// the time to the leaf's expiry when that is within warn (see
// WarnWithin), else 0.
func CheckPair(certFile, keyFile string, now time.Time, warn time.Duration) (remaining time.Duration, err error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return 0, fmt.Errorf("certs: %w", err)
	}
	if err := CheckValidity(cert.Leaf, now); err != nil {
		return 0, err
	}
	if left := cert.Leaf.NotAfter.Sub(now); WarnWithin(cert.Leaf, warn) >= left {
		return left, nil
	}
	return 0, nil
}

// WarnWithin is how long before leaf's expiry to warn: warn, but at most
// a third of the certificate's lifetime, so that short-lived certificates
// renewed well before expiry (at half their lifetime, say) never warn.
func WarnWithin(leaf *x509.Certificate, warn time.Duration) time.Duration {
	return min(warn, leaf.NotAfter.Sub(leaf.NotBefore)/3)
}

// roundAge rounds d for a message: to the second under a minute, else
// to the minute.
func roundAge(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Minute)
}
