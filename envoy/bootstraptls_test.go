package envoy

import (
	"encoding/json"
	"strings"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/grpc/xds"
)

func TestBootstrapTLS(t *testing.T) {
	files := BootstrapTLS{CAFile: "/etc/xds/ca.pem", CertFile: "/etc/xds/envoy.crt", KeyFile: "/etc/xds/envoy.key"}
	for name, tc := range map[string]struct {
		addr    string
		tls     BootstrapTLS
		sni     string
		sanType tlsv3.SubjectAltNameMatcher_SanType
		san     string
		noCert  bool
	}{
		"IP address: an IP SAN, no SNI": {addr: "127.0.0.1:18000", tls: files, sanType: tlsv3.SubjectAltNameMatcher_IP_ADDRESS, san: "127.0.0.1"},
		"host name: DNS SAN and SNI":    {addr: "xds.example.org:18000", tls: files, sni: "xds.example.org", sanType: tlsv3.SubjectAltNameMatcher_DNS, san: "xds.example.org"},
		"server name overrides the host": {addr: "10.0.0.1:18000", tls: func() BootstrapTLS { f := files; f.ServerName = "xds.internal"; return f }(),
			sni: "xds.internal", sanType: tlsv3.SubjectAltNameMatcher_DNS, san: "xds.internal"},
		"CA only: TLS without a client certificate": {addr: "127.0.0.1:18000", tls: BootstrapTLS{CAFile: "/ca.pem"},
			sanType: tlsv3.SubjectAltNameMatcher_IP_ADDRESS, san: "127.0.0.1", noCert: true},
	} {
		t.Run(name, func(t *testing.T) {
			tc := tc
			b, err := Bootstrap(BootstrapConfig{NodeID: "envoy-1", Cluster: "edge", XDSAddress: tc.addr, TLS: &tc.tls})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := BootstrapYAML(b); err != nil { // parses back, validated
				t.Fatal(err)
			}
			ts := b.GetStaticResources().GetClusters()[0].GetTransportSocket()
			var up tlsv3.UpstreamTlsContext
			if ts.GetName() != "envoy.transport_sockets.tls" || ts.GetTypedConfig().UnmarshalTo(&up) != nil {
				t.Fatalf("transport socket %v", ts)
			}
			common := up.GetCommonTlsContext()
			vc := common.GetValidationContext()
			if up.GetSni() != tc.sni || vc.GetTrustedCa().GetFilename() != tc.tls.CAFile || len(vc.GetMatchTypedSubjectAltNames()) != 1 ||
				vc.GetMatchTypedSubjectAltNames()[0].GetSanType() != tc.sanType || vc.GetMatchTypedSubjectAltNames()[0].GetMatcher().GetExact() != tc.san ||
				common.GetAlpnProtocols()[0] != "h2" {
				t.Errorf("UpstreamTlsContext = %v", &up)
			}
			if certs := common.GetTlsCertificates(); tc.noCert != (len(certs) == 0) ||
				!tc.noCert && (certs[0].GetCertificateChain().GetFilename() != tc.tls.CertFile || certs[0].GetPrivateKey().GetFilename() != tc.tls.KeyFile) {
				t.Errorf("client certificates = %v", certs)
			}
		})
	}
	for name, bad := range map[string]BootstrapTLS{
		"no CA":            {CertFile: "/c.crt", KeyFile: "/c.key"},
		"cert without key": {CAFile: "/ca.pem", CertFile: "/c.crt"},
	} {
		if _, err := Bootstrap(BootstrapConfig{NodeID: "e", Cluster: "c", XDSAddress: "127.0.0.1:1", TLS: &bad}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestGRPCBootstrapTLS: the "tls" channel credentials are written as
// grpc-go reads them, and grpc-go's own bootstrap parser accepts them.
func TestGRPCBootstrapTLS(t *testing.T) {
	c := BootstrapConfig{NodeID: "client-1", Cluster: "grpc", XDSAddress: "127.0.0.1:18000",
		TLS: &BootstrapTLS{CAFile: "/etc/xds/ca.pem", CertFile: "/etc/xds/c.crt", KeyFile: "/etc/xds/c.key"}}
	out, err := GRPCBootstrap(c)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		XDSServers []struct {
			ChannelCreds []struct {
				Type   string            `json:"type"`
				Config map[string]string `json:"config"`
			} `json:"channel_creds"`
		} `json:"xds_servers"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	cred := got.XDSServers[0].ChannelCreds[0]
	if cred.Type != "tls" || cred.Config["ca_certificate_file"] != "/etc/xds/ca.pem" ||
		cred.Config["certificate_file"] != "/etc/xds/c.crt" || cred.Config["private_key_file"] != "/etc/xds/c.key" {
		t.Errorf("channel_creds = %+v", cred)
	}
	if _, err := xds.NewXDSResolverWithConfigForTesting(out); err != nil {
		t.Errorf("grpc-go rejects the bootstrap: %v", err)
	}
	c.TLS.ServerName = "xds.example.org"
	if _, err := GRPCBootstrap(c); err == nil || !strings.Contains(err.Error(), "server name") {
		t.Errorf("server name: %v, want an error saying grpc-go cannot override it", err)
	}
}
