package envoy

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	httpupstreamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// RateLimitClusterName is the cluster of xds-server's own rate-limit
// service, the default RLS cluster of a listener's ratelimit filter.
const RateLimitClusterName = "xds-server-ratelimit"

// httpProtocolOptionsKey is the typed_extension_protocol_options key of
// upstream HTTP protocol options.
const httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

// RateLimitCluster returns the cluster named RateLimitClusterName that
// reaches the rate-limit service at address (host:port): STATIC when host
// is an IP address, STRICT_DNS otherwise, HTTP/2 (the RLS is gRPC), with a
// 1s connect timeout.
func RateLimitCluster(address string) (*clusterv3.Cluster, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("envoy: rate-limit cluster: %q is not host:port: %w", address, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 || host == "" {
		return nil, fmt.Errorf("envoy: rate-limit cluster: %q needs a host and a port in [1, 65535]", address)
	}
	kind := clusterv3.Cluster_STRICT_DNS
	if _, err := netip.ParseAddr(host); err == nil {
		kind = clusterv3.Cluster_STATIC
	}
	opts, err := validated(&httpupstreamv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &httpupstreamv3.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &httpupstreamv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpupstreamv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
					Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
				},
			},
		},
	}, "http protocol options", RateLimitClusterName)
	if err != nil {
		return nil, err
	}
	packed, err := marshalAny(opts)
	if err != nil {
		return nil, err
	}
	return validated(&clusterv3.Cluster{
		Name:                          RateLimitClusterName,
		ClusterDiscoveryType:          &clusterv3.Cluster_Type{Type: kind},
		ConnectTimeout:                durationpb.New(time.Second),
		TypedExtensionProtocolOptions: map[string]*anypb.Any{httpProtocolOptionsKey: packed},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: RateLimitClusterName,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{
				LbEndpoints: []*endpointv3.LbEndpoint{{
					HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
						Address: socketAddress(host, uint32(port)),
					}},
				}},
			}},
		},
	}, "cluster", RateLimitClusterName)
}

func socketAddress(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       host,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

// Request is what rate-limit actions look at in an HTTP (or gRPC) request.
type Request struct {
	Method    string            // the :method pseudo-header, e.g. "GET" ("POST" for gRPC)
	Path      string            // the :path pseudo-header
	Authority string            // the :authority pseudo-header
	Headers   map[string]string // other headers; names are case-insensitive
	// RemoteAddress is the client's IP address as Envoy trusts it (the
	// peer, or from x-forwarded-for per the listener's settings); ""
	// means none, as for a Unix socket peer.
	RemoteAddress string
}

// header returns the value of a header (pseudo-headers included) and
// whether the request has it.
func (r Request) header(name string) (string, bool) {
	switch name = strings.ToLower(name); name {
	case ":method":
		return r.Method, r.Method != ""
	case ":path":
		return r.Path, r.Path != ""
	case ":authority", "host":
		return r.Authority, r.Authority != ""
	}
	for k, v := range r.Headers {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// Descriptors returns the descriptors Envoy's ratelimit filter sends to
// the RLS for req, given the virtual host's actions (one descriptor per
// entry, of its actions' entries in order), with Envoy's semantics:
//
//   - remote_address: ("remote_address", req.RemoteAddress); without an
//     address the descriptor is skipped;
//   - generic_key: (descriptor_key or "generic_key", value);
//   - request_headers: (descriptor_key, the header's value); a missing
//     header skips the descriptor, or only this entry with skip_if_absent;
//   - header_value_match: (descriptor_key or "header_match",
//     descriptor_value) if the headers all match (do not all match, with
//     expect_match false); otherwise the descriptor is skipped.
//
// A descriptor left without entries is not sent. The actions are the
// ones HTTPRouteConfig turns into rate_limits, so the two cannot drift.
func Descriptors(actions [][]RateLimitAction, req Request) []*rlcommonv3.RateLimitDescriptor {
	var out []*rlcommonv3.RateLimitDescriptor
	for _, d := range actions {
		desc := &rlcommonv3.RateLimitDescriptor{}
		ok := true
		for _, a := range d {
			var e *rlcommonv3.RateLimitDescriptor_Entry
			if e, ok = entry(a, req); !ok {
				break
			}
			if e != nil {
				desc.Entries = append(desc.Entries, e)
			}
		}
		if ok && len(desc.Entries) > 0 {
			out = append(out, desc)
		}
	}
	return out
}

// entry is the descriptor entry of one action for req: nil and true when
// the action adds nothing, false when the descriptor must be skipped.
func entry(a RateLimitAction, req Request) (*rlcommonv3.RateLimitDescriptor_Entry, bool) {
	kv := func(k, v string) (*rlcommonv3.RateLimitDescriptor_Entry, bool) {
		return &rlcommonv3.RateLimitDescriptor_Entry{Key: k, Value: v}, true
	}
	switch {
	case a.RemoteAddress:
		if req.RemoteAddress == "" {
			return nil, false
		}
		return kv("remote_address", req.RemoteAddress)
	case a.GenericKey != nil:
		return kv(cmp.Or(a.GenericKey.DescriptorKey, "generic_key"), a.GenericKey.Value)
	case a.RequestHeaders != nil:
		v, ok := req.header(a.RequestHeaders.HeaderName)
		if !ok {
			return nil, a.RequestHeaders.SkipIfAbsent
		}
		return kv(a.RequestHeaders.DescriptorKey, v)
	case a.HeaderValueMatch != nil:
		m := a.HeaderValueMatch
		expect := m.ExpectMatch == nil || *m.ExpectMatch
		if MatchHeaders(m.Headers, req) != expect {
			return nil, false
		}
		return kv(cmp.Or(m.DescriptorKey, "header_match"), m.DescriptorValue)
	}
	return nil, false
}

// MatchHeaders reports whether req matches every header matcher, as Envoy
// matches route and rate-limit headers: exact and prefix are
// case-sensitive, regex must match the whole value, and a missing header
// matches only "present: false" (or, inverted, "present: true").
func MatchHeaders(hs []HeaderMatch, req Request) bool {
	for _, h := range hs {
		if !matchHeader(h, req) {
			return false
		}
	}
	return true
}

func matchHeader(h HeaderMatch, req Request) bool {
	v, ok := req.header(h.Name)
	if !ok {
		if h.Invert {
			return h.Present != nil && *h.Present
		}
		return h.Present != nil && !*h.Present
	}
	var match bool
	switch {
	case h.Present != nil:
		match = *h.Present
	case h.Exact != "":
		match = v == h.Exact
	case h.Prefix != "":
		match = strings.HasPrefix(v, h.Prefix)
	default:
		re, err := regexp.Compile(`^(?:` + h.Regex + `)$`)
		match = err == nil && re.MatchString(v)
	}
	return match != h.Invert
}
