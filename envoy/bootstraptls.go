package envoy

import (
	"cmp"
	"errors"
	"net/netip"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// BootstrapTLS are the files of a node's TLS connection to xds-server.
type BootstrapTLS struct {
	CAFile   string // PEM CA bundle that verifies xds-server's certificate; required
	CertFile string // PEM client certificate (mTLS); "" = none
	KeyFile  string // its private key; set exactly when CertFile is
	// ServerName is the name xds-server's certificate is verified for (and
	// Envoy's SNI); "" = the host of the xDS address. Envoy only: grpc-go
	// verifies the host of the address.
	ServerName string
}

func (t BootstrapTLS) validate() error {
	var errs []error
	if t.CAFile == "" {
		errs = append(errs, errors.New("envoy: bootstrap: TLS needs a CA file (--tls-ca) to verify xds-server"))
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		errs = append(errs, errors.New("envoy: bootstrap: a client certificate (--tls-cert) and its key (--tls-key) go together"))
	}
	return errors.Join(errs...)
}

// serverName returns how an upstream's certificate is verified for name
// and the SNI sent: an IP SAN and no SNI when name is an IP address, else
// a DNS SAN and name as SNI.
func serverName(name string) (san *tlsv3.SubjectAltNameMatcher, sni string) {
	san = &tlsv3.SubjectAltNameMatcher{SanType: tlsv3.SubjectAltNameMatcher_DNS,
		Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: name}}}
	if _, err := netip.ParseAddr(name); err == nil {
		san.SanType = tlsv3.SubjectAltNameMatcher_IP_ADDRESS
		return san, ""
	}
	return san, name
}

func dataSource(file string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: file}}
}

// upstreamTLS is the transport socket of the xds-server cluster: TLS with
// HTTP/2 (ALPN h2), xds-server's certificate verified by the CA and for
// the server name (a DNS SAN, or an IP SAN when it is an address), and
// the client certificate if one is given.
func upstreamTLS(t BootstrapTLS, host string) (*corev3.TransportSocket, error) {
	san, sni := serverName(cmp.Or(t.ServerName, host))
	common := &tlsv3.CommonTlsContext{
		AlpnProtocols: []string{"h2"},
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: dataSource(t.CAFile), MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{san},
		}},
	}
	if t.CertFile != "" {
		common.TlsCertificates = []*tlsv3.TlsCertificate{{CertificateChain: dataSource(t.CertFile), PrivateKey: dataSource(t.KeyFile)}}
	}
	ctx, err := anypb.New(&tlsv3.UpstreamTlsContext{Sni: sni, CommonTlsContext: common})
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: ctx}}, nil
}

// withTLS adds c.TLS's transport socket to the xds-server cluster.
func (c BootstrapConfig) withTLS(cl *clusterv3.Cluster) error {
	if c.TLS == nil {
		return nil
	}
	host, _, _ := splitHostPort(c.xdsAddresses()[0]) // checked by Validate
	ts, err := upstreamTLS(*c.TLS, host)
	if err != nil {
		return err
	}
	cl.TransportSocket = ts
	return nil
}
