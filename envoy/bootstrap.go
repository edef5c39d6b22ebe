package envoy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"
)

// XDSClusterName is the name of the static cluster, in a generated Envoy
// bootstrap, that points at xds-server's ADS listener.
const XDSClusterName = "xds-server"

// BootstrapConfig is the input of Bootstrap and GRPCBootstrap.
type BootstrapConfig struct {
	NodeID   string   // node.id; required
	Cluster  string   // node.cluster; required (subsetting groups nodes by it)
	Locality Locality // node.locality; all parts may be empty
	// Datacenter, when set, is the node's metadata "datacenter": the
	// datacenter xds-server places the node in for locality failover
	// (else its first of discovery.consul.datacenters).
	Datacenter string
	// XDSAddress is host:port of xds-server's ADS listener (the host is an
	// IP or a DNS name), or several, comma-separated: the replicas of one
	// control plane, each an endpoint of Envoy's xds-server cluster (Envoy
	// moves its ADS stream to another when one goes away) and, for
	// grpc-go, xds_servers in order (the later ones are fallbacks).
	XDSAddress string
	// Delta selects the incremental protocol (DELTA_GRPC) instead of state
	// of the world (GRPC). Envoy only; grpc-go speaks state of the world.
	Delta bool
	// AdminAddress is the IP:port of Envoy's admin listener; "" means no
	// admin listener; port 0 lets the kernel pick one (read it with
	// Envoy's --admin-address-path). Envoy only.
	AdminAddress string
	// TLS, when set, connects to xds-server over TLS (mTLS with a client
	// certificate): an UpstreamTlsContext on Envoy's xds-server cluster,
	// grpc-go's "tls" channel credentials.
	TLS *BootstrapTLS
}

// Validate reports every problem of c.
func (c BootstrapConfig) Validate() error {
	var errs []error
	if strings.TrimSpace(c.NodeID) == "" {
		errs = append(errs, errors.New("envoy: bootstrap: node id is empty"))
	}
	if strings.TrimSpace(c.Cluster) == "" {
		errs = append(errs, errors.New("envoy: bootstrap: node cluster is empty"))
	}
	for _, addr := range c.xdsAddresses() {
		if _, _, err := splitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("envoy: bootstrap: xds address: %w", err))
		}
	}
	if c.AdminAddress != "" {
		if host, _, err := splitHostPortAny(c.AdminAddress); err != nil {
			errs = append(errs, fmt.Errorf("envoy: bootstrap: admin address: %w", err))
		} else if _, err := netip.ParseAddr(host); err != nil {
			errs = append(errs, fmt.Errorf("envoy: bootstrap: admin address %q: host must be an IP address", c.AdminAddress))
		}
	}
	if c.TLS != nil {
		if err := c.TLS.validate(); err != nil {
			errs = append(errs, err)
		}
		if c.TLS.ServerName == "" && severalHosts(c.xdsAddresses()) {
			errs = append(errs, errors.New("envoy: bootstrap: TLS to replicas on different hosts needs one name their certificates share (--tls-server-name): Envoy verifies every replica for the same name"))
		}
	}
	return errors.Join(errs...)
}

// xdsAddresses is c.XDSAddress split at commas, blanks trimmed; one
// empty address when it is empty (which Validate reports).
func (c BootstrapConfig) xdsAddresses() []string {
	parts := strings.Split(c.XDSAddress, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return parts
}

// severalHosts reports whether addrs name more than one host.
func severalHosts(addrs []string) bool {
	first, _, _ := net.SplitHostPort(addrs[0])
	for _, a := range addrs[1:] {
		if h, _, _ := net.SplitHostPort(a); h != first {
			return true
		}
	}
	return false
}

// splitHostPort splits a host:port whose host is not empty and whose port
// is in [1, 65535].
func splitHostPort(addr string) (string, uint32, error) {
	host, port, err := splitHostPortAny(addr)
	if err == nil && port == 0 {
		err = fmt.Errorf("%q: port 0 is not in [1, 65535]", addr)
	}
	return host, port, err
}

// splitHostPortAny splits a host:port whose host is not empty and whose
// port is in [0, 65535].
func splitHostPortAny(addr string) (string, uint32, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if host == "" {
		return "", 0, fmt.Errorf("%q has no host", addr)
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("%q: port %q is not in [1, 65535]", addr, p)
	}
	return host, uint32(port), nil
}

// Bootstrap returns a minimal Envoy bootstrap for node c.NodeID: ADS to
// xds-server (c.XDSAddress, over HTTP/2, delta or state of the world),
// clusters and listeners over ADS, a static cluster for xds-server itself,
// with c.TLS the static secrets BootstrapCASecret and BootstrapClientSecret
// (for clusters xds-server sends) and, if c.AdminAddress is set, the admin
// listener. Everything else
// (clusters, endpoints, listeners, routes) comes from xds-server. The
// result passes ValidateAll.
func Bootstrap(c BootstrapConfig) (*bootstrapv3.Bootstrap, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	apiType := corev3.ApiConfigSource_GRPC
	if c.Delta {
		apiType = corev3.ApiConfigSource_DELTA_GRPC
	}
	xdsCluster, err := xdsServerCluster(c.xdsAddresses())
	if err != nil {
		return nil, err
	}
	if err := c.withTLS(xdsCluster); err != nil {
		return nil, err
	}
	b := &bootstrapv3.Bootstrap{
		Node:           bootstrapNode(c),
		ClusterManager: loadStatsManager(), // Envoy's load reports (LRS) to xds-server
		DynamicResources: &bootstrapv3.Bootstrap_DynamicResources{
			AdsConfig: &corev3.ApiConfigSource{
				ApiType:             apiType,
				TransportApiVersion: corev3.ApiVersion_V3,
				GrpcServices: []*corev3.GrpcService{{
					TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
						EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: XDSClusterName},
					},
				}},
			},
			CdsConfig: adsConfigSource(),
			LdsConfig: adsConfigSource(),
		},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Clusters: []*clusterv3.Cluster{xdsCluster},
		},
	}
	if c.TLS != nil {
		b.StaticResources.Secrets = bootstrapSecrets(*c.TLS)
	}
	if c.AdminAddress != "" {
		host, port, _ := splitHostPortAny(c.AdminAddress) // checked by Validate
		b.Admin = &bootstrapv3.Admin{Address: hostPortAddress(host, port)}
	}
	return validated(b, "bootstrap", c.NodeID)
}

func bootstrapNode(c BootstrapConfig) *corev3.Node {
	n := &corev3.Node{Id: c.NodeID, Cluster: c.Cluster}
	if c.Locality != (Locality{}) {
		n.Locality = &corev3.Locality{Region: c.Locality.Region, Zone: c.Locality.Zone, SubZone: c.Locality.SubZone}
	}
	if c.Datacenter != "" {
		n.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{"datacenter": structpb.NewStringValue(c.Datacenter)}}
	}
	return n
}

// xdsServerCluster is the static cluster for the ADS stream: HTTP/2 (gRPC)
// to addrs (one endpoint each), resolved by DNS (STRICT_DNS, IPv4
// preferred) when a host is a name and STATIC when all are IP addresses.
func xdsServerCluster(addrs []string) (*clusterv3.Cluster, error) {
	opts, err := protocolOptions(HTTP2)
	if err != nil {
		return nil, err
	}
	c := &clusterv3.Cluster{
		Name:                          XDSClusterName,
		ClusterDiscoveryType:          &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:                durationpb.New(time.Second),
		TypedExtensionProtocolOptions: opts,
	}
	lbs := make([]*endpointv3.LbEndpoint, 0, len(addrs))
	for _, addr := range addrs {
		host, port, err := splitHostPort(addr)
		if err != nil {
			return nil, err
		}
		lbs = append(lbs, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: hostPortAddress(host, port)}},
		})
		if _, err := netip.ParseAddr(host); err != nil {
			c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS}
			c.DnsLookupFamily = clusterv3.Cluster_V4_PREFERRED
		}
	}
	c.LoadAssignment = &endpointv3.ClusterLoadAssignment{
		ClusterName: XDSClusterName,
		Endpoints:   []*endpointv3.LocalityLbEndpoints{{LbEndpoints: lbs}},
	}
	return c, nil
}

func hostPortAddress(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       host,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

// BootstrapYAML renders b as YAML: protojson with the proto field names
// (as Envoy's documentation spells them), keys sorted. The result parses
// back (ParseBootstrapYAML) into a message equal to b, or it is an error.
func BootstrapYAML(b *bootstrapv3.Bootstrap) ([]byte, error) {
	j, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("envoy: bootstrap: %w", err)
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		return nil, fmt.Errorf("envoy: bootstrap: %w", err)
	}
	back, err := ParseBootstrapYAML(y)
	if err != nil {
		return nil, err
	}
	if !proto.Equal(back, b) {
		return nil, errors.New("envoy: bootstrap: the YAML does not parse back into the same bootstrap")
	}
	return y, nil
}

// ParseBootstrapYAML parses an Envoy bootstrap written in YAML (or JSON) as
// Envoy would: unknown fields are errors, and the result must pass
// ValidateAll. Typed configs (Any) must be of types linked into the binary.
func ParseBootstrapYAML(data []byte) (*bootstrapv3.Bootstrap, error) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("envoy: bootstrap: %w", err)
	}
	b := &bootstrapv3.Bootstrap{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(j, b); err != nil {
		return nil, fmt.Errorf("envoy: bootstrap: %w", err)
	}
	return validated(b, "bootstrap", b.GetNode().GetId())
}
