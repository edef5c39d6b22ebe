package envoy

import (
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// routerFilterName is the name of Envoy's router HTTP filter, the terminal
// filter grpc-go requires at the end of every HTTP filter chain.
const routerFilterName = "envoy.filters.http.router"

// Listener returns the api_listener that proxyless gRPC clients resolve for
// "xds:///<s.Name>": a Listener named s.Name whose HttpConnectionManager
// fetches the RouteConfiguration named s.Name over ADS and has the router as
// its only HTTP filter. Only s.Name is read.
func Listener(s Service) (*listenerv3.Listener, error) {
	if err := validateName(s); err != nil {
		return nil, err
	}
	router, err := marshalAny(&routerv3.Router{})
	if err != nil {
		return nil, err
	}
	hcm, err := validated(&hcmv3.HttpConnectionManager{
		StatPrefix: s.Name,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    adsConfigSource(),
			RouteConfigName: s.Name,
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       routerFilterName,
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router},
		}},
	}, "http connection manager", s.Name)
	if err != nil {
		return nil, err
	}
	// ValidateAll does not look inside Any fields, hence the check above.
	api, err := marshalAny(hcm)
	if err != nil {
		return nil, err
	}
	return validated(&listenerv3.Listener{
		Name:        s.Name,
		ApiListener: &listenerv3.ApiListener{ApiListener: api},
	}, "listener", s.Name)
}

// RouteConfig returns the RouteConfiguration named s.Name: one virtual host
// named s.Name for every domain ("*") with one route that sends every path
// (prefix "/") to the cluster s.Name. Only s.Name is read.
func RouteConfig(s Service) (*routev3.RouteConfiguration, error) {
	if err := validateName(s); err != nil {
		return nil, err
	}
	return validated(&routev3.RouteConfiguration{
		Name: s.Name,
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    s.Name,
			Domains: []string{"*"},
			Routes: []*routev3.Route{{
				Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{
					ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: s.Name},
				}},
			}},
		}},
	}, "route configuration", s.Name)
}
