package envoy

import (
	"cmp"
	"fmt"
	"net"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rlconfigv3 "github.com/envoyproxy/go-control-plane/envoy/config/ratelimit/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// HTTP filter and network filter names.
const (
	admissionFilterName = "envoy.filters.http.admission_control"
	rateLimitFilterName = "envoy.filters.http.ratelimit"
	hcmFilterName       = "envoy.filters.network.http_connection_manager"
)

// ListenerResources are the translation of one HTTPListener.
type ListenerResources struct {
	// Listener is Envoy's: bound to the listener's address, one filter
	// chain with an HttpConnectionManager that fetches Route over ADS and
	// takes the peer as the client (use_remote_address).
	Listener *listenerv3.Listener
	// APIListener is proxyless gRPC's, for "xds:///<name>": an
	// api_listener of the same name and filters, the ones other than the
	// router marked is_optional (grpc-go implements neither the ratelimit
	// nor the admission_control filter, and NACKs unknown filters that
	// are not optional).
	APIListener *listenerv3.Listener
	// Route is the RouteConfiguration both fetch (see HTTPRouteConfig).
	Route *routev3.RouteConfiguration
}

// BuildHTTPListener translates l into its Envoy listener, proxyless
// api_listener and route configuration. The HTTP filters are, in order:
// envoy.filters.http.admission_control (if l.AdmissionControl is set),
// envoy.filters.http.ratelimit (if l.RateLimit is set; its RLS is the
// gRPC cluster l.RateLimit.Cluster, RateLimitClusterName by default, with
// transport API v3), then the router.
func BuildHTTPListener(l HTTPListener) (ListenerResources, error) {
	rc, err := HTTPRouteConfig(l) // validates l
	if err != nil {
		return ListenerResources{}, err
	}
	filters, err := httpFilters(l)
	if err != nil {
		return ListenerResources{}, err
	}
	lis, err := envoyListener(l, filters)
	if err != nil {
		return ListenerResources{}, err
	}
	optional := make([]*hcmv3.HttpFilter, len(filters))
	for i, f := range filters {
		optional[i] = proto.CloneOf(f)
		optional[i].IsOptional = i < len(filters)-1
	}
	hcm, err := connectionManager(l.Name, optional)
	if err != nil {
		return ListenerResources{}, err
	}
	api, err := marshalAny(hcm)
	if err != nil {
		return ListenerResources{}, err
	}
	apiLis, err := validated(&listenerv3.Listener{Name: l.Name, ApiListener: &listenerv3.ApiListener{ApiListener: api}},
		"api listener", l.Name)
	if err != nil {
		return ListenerResources{}, err
	}
	return ListenerResources{Listener: lis, APIListener: apiLis, Route: rc}, nil
}

// envoyListener is the Listener Envoy binds at l.Address.
func envoyListener(l HTTPListener, filters []*hcmv3.HttpFilter) (*listenerv3.Listener, error) {
	hcm, err := connectionManager(l.Name, filters)
	if err != nil {
		return nil, err
	}
	// Envoy faces clients here: the peer address, not x-forwarded-for, is
	// the client's (the remote_address rate-limit action's value).
	hcm.UseRemoteAddress = wrapperspb.Bool(true)
	packed, err := marshalAny(hcm)
	if err != nil {
		return nil, err
	}
	host, portStr, _ := net.SplitHostPort(l.Address) // checked by Validate
	port, _ := strconv.ParseUint(portStr, 10, 16)
	return validated(&listenerv3.Listener{
		Name:    l.Name,
		Address: socketAddress(host, uint32(port)),
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{
				Name:       hcmFilterName,
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: packed},
			}},
		}},
	}, "listener", l.Name)
}

// connectionManager is a validated HttpConnectionManager that fetches the
// RouteConfiguration named name over ADS.
func connectionManager(name string, filters []*hcmv3.HttpFilter) (*hcmv3.HttpConnectionManager, error) {
	return validated(&hcmv3.HttpConnectionManager{
		StatPrefix: name,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    adsConfigSource(),
			RouteConfigName: name,
		}},
		HttpFilters: filters,
	}, "http connection manager", name)
}

// httpFilters are l's HTTP filters, each typed config validated before it
// is packed (ValidateAll does not look inside Any).
func httpFilters(l HTTPListener) ([]*hcmv3.HttpFilter, error) {
	var out []*hcmv3.HttpFilter
	add := func(name string, cfg interface {
		proto.Message
		validatable
	}) error {
		if err := cfg.ValidateAll(); err != nil {
			return fmt.Errorf("envoy: listener %q: filter %s: %w", l.Name, name, err)
		}
		a, err := marshalAny(cfg)
		if err != nil {
			return err
		}
		out = append(out, &hcmv3.HttpFilter{Name: name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: a}})
		return nil
	}
	if ac := l.AdmissionControl; ac != nil {
		if err := add(admissionFilterName, admissionProto(l.Name, *ac)); err != nil {
			return nil, err
		}
	}
	if rl := l.RateLimit; rl != nil {
		if err := add(rateLimitFilterName, rateLimitFilterProto(*rl)); err != nil {
			return nil, err
		}
	}
	if err := add(routerFilterName, &routerv3.Router{}); err != nil {
		return nil, err
	}
	return out, nil
}

// rateLimitFilterProto is the ratelimit filter's config: domain, RLS
// cluster (gRPC, transport v3), timeout and failure mode. The descriptors
// come from the virtual host's rate_limits (stage 0).
func rateLimitFilterProto(rl RateLimit) *ratelimitv3.RateLimit {
	f := &ratelimitv3.RateLimit{
		Domain:          rl.Domain,
		FailureModeDeny: rl.FailureModeDeny,
		RateLimitService: &rlconfigv3.RateLimitServiceConfig{
			GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
				EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: cmp.Or(rl.Cluster, RateLimitClusterName)},
			}},
			TransportApiVersion: corev3.ApiVersion_V3,
		},
	}
	if rl.Timeout > 0 {
		f.Timeout = durationpb.New(rl.Timeout)
	}
	return f
}
