package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Config names the PEM files of one listener.
type Config struct {
	Name         string // the listener (xds, ratelimit, admin): the metrics' label and the logs'
	CertFile     string // server certificate chain, PEM
	KeyFile      string // its private key, PEM
	ClientCAFile string // CA bundle that verifies client certificates, PEM; "" = no client certificate asked (no mTLS)
	// CheckEvery is how often, at most, a handshake checks the files for
	// changes (modification time and size); 0 means DefaultCheckEvery.
	CheckEvery time.Duration
	// ExpiryWarning is how long before the certificate expires the
	// listener logs a warning (again once a day, and an error once it
	// has expired), at most a third of the certificate's lifetime (see
	// WarnWithin); 0 means DefaultExpiryWarning.
	ExpiryWarning time.Duration
	Now           func() time.Time // nil means time.Now
	Logger        *slog.Logger     // nil means slog.Default()
	Metrics       *Metrics         // nil: none
}

// Enabled reports whether c asks for TLS (a certificate or a key is set).
func (c Config) Enabled() bool { return c.CertFile != "" || c.KeyFile != "" || c.ClientCAFile != "" }

// Validate reports a configuration that cannot serve TLS.
func (c Config) Validate() error {
	var errs []error
	if c.CertFile == "" {
		errs = append(errs, fmt.Errorf("certs: %s: cert_file is empty", c.Name))
	}
	if c.KeyFile == "" {
		errs = append(errs, fmt.Errorf("certs: %s: key_file is empty", c.Name))
	}
	return errors.Join(errs...)
}

// Server is the TLS side of one listener. Its tls.Config serves the
// certificate in CertFile and KeyFile and, with ClientCAFile, requires a
// client certificate issued by that CA. The files are checked on
// handshakes (at most once per CheckEvery): new handshakes use new files,
// open connections keep theirs, and files that do not load (a rotation
// half done, a key that does not match, a certificate expired or not
// valid yet) keep the previous material.
type Server struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex // serializes checks
	checked time.Time
	stamps  [3]stamp
	cur     atomic.Pointer[material]
	warned  time.Time // last expiry warning; zero: none for the current certificate
}

type material struct {
	cert  *tls.Certificate
	roots *x509.CertPool // nil without a client CA
}

// NewServer loads the files of cfg at once.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.CheckEvery <= 0 {
		cfg.CheckEvery = DefaultCheckEvery
	}
	if cfg.ExpiryWarning <= 0 {
		cfg.ExpiryWarning = DefaultExpiryWarning
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "certs", "listener", cfg.Name)}
	st, m, err := s.load()
	if err != nil {
		return nil, err
	}
	s.install(st, m)
	s.checked = cfg.Now()
	s.warnExpiry(s.checked)
	return s, nil
}

func (s *Server) files() [3]string {
	return [3]string{s.cfg.CertFile, s.cfg.KeyFile, s.cfg.ClientCAFile}
}

// load reads the files and the stamps they had before reading.
func (s *Server) load() ([3]stamp, *material, error) {
	var st [3]stamp
	for i, f := range s.files() {
		if f == "" {
			continue
		}
		var err error
		if st[i], err = stampOf(f); err != nil {
			return st, nil, fmt.Errorf("certs: %s: %w", s.cfg.Name, err)
		}
	}
	cert, err := tls.LoadX509KeyPair(s.cfg.CertFile, s.cfg.KeyFile)
	if err != nil {
		return st, nil, fmt.Errorf("certs: %s: %w", s.cfg.Name, err)
	}
	if err := CheckValidity(cert.Leaf, s.cfg.Now()); err != nil {
		return st, nil, fmt.Errorf("certs: %s: %s: %w", s.cfg.Name, s.cfg.CertFile, err)
	}
	m := &material{cert: &cert}
	if s.cfg.ClientCAFile != "" {
		pem, err := os.ReadFile(s.cfg.ClientCAFile)
		if err != nil {
			return st, nil, fmt.Errorf("certs: %s: %w", s.cfg.Name, err)
		}
		m.roots = x509.NewCertPool()
		if !m.roots.AppendCertsFromPEM(pem) {
			return st, nil, fmt.Errorf("certs: %s: %s holds no PEM certificate", s.cfg.Name, s.cfg.ClientCAFile)
		}
	}
	return st, m, nil
}

func (s *Server) install(st [3]stamp, m *material) {
	s.stamps = st
	s.cur.Store(m)
	s.warned = time.Time{}
	s.cfg.Metrics.loaded(s.cfg.Name, m.cert.Leaf)
}

// check reloads the files if they changed since the last check.
func (s *Server) check() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	if now.Sub(s.checked) < s.cfg.CheckEvery {
		return
	}
	s.checked = now
	defer s.warnExpiry(now)
	changed := false
	for i, f := range s.files() {
		if f == "" {
			continue
		}
		if st, err := stampOf(f); err != nil || st != s.stamps[i] {
			changed = true
		}
	}
	if !changed {
		return
	}
	st, m, err := s.load()
	if err != nil {
		s.cfg.Metrics.reloaded(s.cfg.Name, false)
		s.log.Warn("TLS files changed but do not load; keeping the previous ones", "error", err)
		return
	}
	s.install(st, m)
	s.cfg.Metrics.reloaded(s.cfg.Name, true)
	s.log.Info("TLS files reloaded", "serial", m.cert.Leaf.SerialNumber.String(), "not_after", m.cert.Leaf.NotAfter)
}

// warnExpiry logs, at most once a day, that the certificate in use
// expires within its warning time (a warning) or has expired (an error:
// new handshakes fail on the client side). s.mu is held or s unshared.
func (s *Server) warnExpiry(now time.Time) {
	leaf := s.cur.Load().cert.Leaf
	left := leaf.NotAfter.Sub(now)
	if left > WarnWithin(leaf, s.cfg.ExpiryWarning) || (!s.warned.IsZero() && now.Sub(s.warned) < 24*time.Hour) {
		return
	}
	s.warned = now
	attrs := []any{"serial", leaf.SerialNumber.String(), "not_after", leaf.NotAfter.UTC(), "cert_file", s.cfg.CertFile}
	if left <= 0 {
		s.log.Error("TLS certificate has expired: clients will refuse the handshake; replace the files", attrs...)
		return
	}
	s.log.Warn("TLS certificate expires soon; replace the files before it does",
		append(attrs, "expires_in", roundAge(left).String())...)
}

// TLSConfig returns the listener's tls.Config: TLS 1.2 at least, crypto/tls's
// cipher suites, and with a client CA a verified client certificate required.
func (s *Server) TLSConfig() *tls.Config {
	c := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			s.check()
			return s.cur.Load().cert, nil
		},
	}
	if s.cfg.ClientCAFile != "" {
		// Asked for here, required and verified in VerifyConnection against
		// the current CA (which may have been rotated since this config was
		// made), so that every refusal is counted.
		c.ClientAuth = tls.RequestClientCert
		c.VerifyConnection = s.verifyClient
	}
	return c
}

func (s *Server) verifyClient(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		s.cfg.Metrics.rejected(s.cfg.Name)
		return errors.New("certs: no client certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots: s.cur.Load().roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		s.cfg.Metrics.rejected(s.cfg.Name)
		return fmt.Errorf("certs: client certificate: %w", err)
	}
	return nil
}
