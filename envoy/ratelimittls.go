package envoy

import (
	"fmt"
	"net"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// Names of the static secrets a bootstrap with TLS holds (Bootstrap): the
// CA that verifies xds-server (--tls-ca) and the node's client certificate
// (--tls-cert, --tls-key). Clusters xds-server sends refer to them by name,
// so each Envoy presents its own certificate, from its own files.
const (
	BootstrapCASecret     = "xds-server-ca"
	BootstrapClientSecret = "xds-server-client"
)

// RateLimitTLS says that the rate-limit service serves TLS
// (ratelimit.tls.*), so the generated RateLimitClusterName cluster must
// speak it.
type RateLimitTLS struct {
	// ClientCertificate: the service asks for client certificates (mTLS);
	// Envoy presents its bootstrap's BootstrapClientSecret.
	ClientCertificate bool
}

// SecureRateLimitCluster is RateLimitCluster(address) with a TLS
// transport socket: ALPN h2; the service's certificate verified with the
// CA of the bootstrap's static secret BootstrapCASecret, for the host of
// address (an IP SAN for an IP address, else a DNS SAN, also sent as SNI);
// with t.ClientCertificate, the client certificate of the static secret
// BootstrapClientSecret. An Envoy whose bootstrap lacks a secret it names
// rejects the cluster.
func SecureRateLimitCluster(address string, t RateLimitTLS) (*clusterv3.Cluster, error) {
	c, err := RateLimitCluster(address)
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(address) // checked by RateLimitCluster
	san, sni := serverName(host)
	common := &tlsv3.CommonTlsContext{
		AlpnProtocols: []string{"h2"},
		ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{
			CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{san}},
				ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: BootstrapCASecret},
			},
		},
	}
	if t.ClientCertificate {
		common.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{{Name: BootstrapClientSecret}}
	}
	ctx, err := validated(&tlsv3.UpstreamTlsContext{Sni: sni, CommonTlsContext: common}, "upstream tls context", RateLimitClusterName)
	if err != nil {
		return nil, err
	}
	packed, err := anypb.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("envoy: %s: upstream tls context: %w", RateLimitClusterName, err)
	}
	c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls",
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: packed}}
	return validated(c, "cluster", RateLimitClusterName)
}

// bootstrapSecrets are the static secrets of a bootstrap with TLS:
// BootstrapCASecret, and BootstrapClientSecret when t has a client
// certificate.
func bootstrapSecrets(t BootstrapTLS) []*tlsv3.Secret {
	out := []*tlsv3.Secret{{Name: BootstrapCASecret, Type: &tlsv3.Secret_ValidationContext{
		ValidationContext: &tlsv3.CertificateValidationContext{TrustedCa: dataSource(t.CAFile)},
	}}}
	if t.CertFile != "" {
		out = append(out, &tlsv3.Secret{Name: BootstrapClientSecret, Type: &tlsv3.Secret_TlsCertificate{
			TlsCertificate: &tlsv3.TlsCertificate{CertificateChain: dataSource(t.CertFile), PrivateKey: dataSource(t.KeyFile)},
		}})
	}
	return out
}
