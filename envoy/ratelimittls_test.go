package envoy

import (
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// TestSecureRateLimitCluster: the generated RLS cluster for a TLS
// rate-limit service verifies it with the bootstrap's CA secret for the
// host of its address, and presents the bootstrap's client certificate
// secret when the service asks for one.
func TestSecureRateLimitCluster(t *testing.T) {
	for name, tc := range map[string]struct {
		addr    string
		tls     RateLimitTLS
		sni     string
		sanType tlsv3.SubjectAltNameMatcher_SanType
		san     string
	}{
		"IP address, mTLS: an IP SAN, no SNI": {addr: "127.0.0.1:18081", tls: RateLimitTLS{ClientCertificate: true},
			sanType: tlsv3.SubjectAltNameMatcher_IP_ADDRESS, san: "127.0.0.1"},
		"host name, TLS: a DNS SAN and SNI": {addr: "rls.example.org:18081", sni: "rls.example.org",
			sanType: tlsv3.SubjectAltNameMatcher_DNS, san: "rls.example.org"},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := SecureRateLimitCluster(tc.addr, tc.tls)
			if err != nil {
				t.Fatal(err)
			}
			plain, _ := RateLimitCluster(tc.addr)
			if c.GetName() != RateLimitClusterName || c.GetType() != plain.GetType() || c.GetTypedExtensionProtocolOptions() == nil {
				t.Errorf("cluster %v, want RateLimitCluster's with a transport socket", c)
			}
			var up tlsv3.UpstreamTlsContext
			if ts := c.GetTransportSocket(); ts.GetName() != "envoy.transport_sockets.tls" || ts.GetTypedConfig().UnmarshalTo(&up) != nil {
				t.Fatalf("transport socket %v", ts)
			}
			common := up.GetCommonTlsContext()
			combined := common.GetCombinedValidationContext()
			sans := combined.GetDefaultValidationContext().GetMatchTypedSubjectAltNames()
			if up.GetSni() != tc.sni || len(common.GetAlpnProtocols()) != 1 || common.GetAlpnProtocols()[0] != "h2" ||
				combined.GetValidationContextSdsSecretConfig().GetName() != BootstrapCASecret ||
				len(sans) != 1 || sans[0].GetSanType() != tc.sanType || sans[0].GetMatcher().GetExact() != tc.san {
				t.Errorf("tls context %v", &up)
			}
			certs := common.GetTlsCertificateSdsSecretConfigs()
			if tc.tls.ClientCertificate != (len(certs) == 1 && certs[0].GetName() == BootstrapClientSecret && certs[0].GetSdsConfig() == nil) {
				t.Errorf("client certificate secrets %v, want ClientCertificate %v", certs, tc.tls.ClientCertificate)
			}
		})
	}
	if _, err := SecureRateLimitCluster("127.0.0.1", RateLimitTLS{}); err == nil {
		t.Error("an address without a port: no error")
	}
}

// TestBootstrapSecrets: a bootstrap with TLS holds the static secrets the
// clusters xds-server sends refer to, from the --tls-* files.
func TestBootstrapSecrets(t *testing.T) {
	for name, tc := range map[string]struct {
		tls  *BootstrapTLS
		want []string
	}{
		"no TLS":             {nil, nil},
		"CA only":            {&BootstrapTLS{CAFile: "/ca.pem"}, []string{BootstrapCASecret}},
		"client certificate": {&BootstrapTLS{CAFile: "/ca.pem", CertFile: "/e.crt", KeyFile: "/e.key"}, []string{BootstrapCASecret, BootstrapClientSecret}},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := Bootstrap(BootstrapConfig{NodeID: "e", Cluster: "edge", XDSAddress: "127.0.0.1:18000", TLS: tc.tls})
			if err != nil {
				t.Fatal(err)
			}
			secrets := b.GetStaticResources().GetSecrets()
			if len(secrets) != len(tc.want) {
				t.Fatalf("secrets %v, want %v", secrets, tc.want)
			}
			for i, s := range secrets {
				if s.GetName() != tc.want[i] {
					t.Errorf("secret %d is %q, want %q", i, s.GetName(), tc.want[i])
				}
			}
			if len(secrets) > 0 && secrets[0].GetValidationContext().GetTrustedCa().GetFilename() != "/ca.pem" {
				t.Errorf("CA secret %v", secrets[0])
			}
			if len(secrets) > 1 && (secrets[1].GetTlsCertificate().GetCertificateChain().GetFilename() != "/e.crt" ||
				secrets[1].GetTlsCertificate().GetPrivateKey().GetFilename() != "/e.key") {
				t.Errorf("client secret %v", secrets[1])
			}
		})
	}
}
