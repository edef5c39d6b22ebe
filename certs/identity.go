package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// Identities returns the names a certificate proves: its URI SANs (like
// spiffe://example.org/ns/web/sa/envoy), then its DNS SANs.
func Identities(cert *x509.Certificate) []string {
	if cert == nil {
		return nil
	}
	out := make([]string, 0, len(cert.URIs)+len(cert.DNSNames))
	for _, u := range cert.URIs {
		out = append(out, u.String())
	}
	return append(out, cert.DNSNames...)
}

// PeerCertificate returns the client certificate of a TLS connection,
// verified by the server's tls.Config (Server with a client CA); nil
// without one.
func PeerCertificate(cs tls.ConnectionState) *x509.Certificate {
	if len(cs.PeerCertificates) == 0 {
		return nil
	}
	return cs.PeerCertificates[0]
}

// GRPCPeer returns the identities of the client certificate of a gRPC
// call or stream's connection; ok is false on a connection without TLS
// or without a client certificate.
func GRPCPeer(ctx context.Context) (ids []string, ok bool) {
	p, found := peer.FromContext(ctx)
	if !found {
		return nil, false
	}
	info, isTLS := p.AuthInfo.(credentials.TLSInfo)
	if !isTLS {
		return nil, false
	}
	cert := PeerCertificate(info.State)
	if cert == nil {
		return nil, false
	}
	return Identities(cert), true
}
