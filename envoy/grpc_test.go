package envoy

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	ringhashv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"
	wrrlocalityv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// grpc-go's xDS client (v1.85, internal/xds/xdsclient/xdsresource) is
// internal to grpc, so these checks restate the conditions under which its
// unmarshal_{lds,rds,cds,eds}.go NACK a resource (or silently ignore part
// of it, which would break us just as well). Each resource goes through an
// Any round trip first, as on the wire.

// checkGRPCResources applies every check to every resource of res.
func checkGRPCResources(res Resources) error {
	var errs []error
	for _, m := range res.Listeners {
		errs = append(errs, viaAny(m, checkGRPCListener))
	}
	for _, m := range res.Routes {
		errs = append(errs, viaAny(m, checkGRPCRoute))
	}
	for _, m := range res.Clusters {
		errs = append(errs, viaAny(m, checkGRPCCluster))
	}
	for _, m := range res.LoadAssignments {
		errs = append(errs, viaAny(m, checkGRPCLoadAssignment))
	}
	return errors.Join(errs...)
}

func viaAny[M proto.Message](m M, check func(M) error) error {
	a, err := anypb.New(m)
	if err != nil {
		return err
	}
	back := m.ProtoReflect().New().Interface().(M)
	if err := a.UnmarshalTo(back); err != nil {
		return err
	}
	return check(back)
}

// checkGRPCListener mirrors processClientSideListener and processHTTPFilters.
func checkGRPCListener(l *listenerv3.Listener) error {
	if l.GetName() == "" {
		return errors.New("lds: empty name")
	}
	api := l.GetApiListener().GetApiListener()
	if api.GetTypeUrl() != "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager" {
		return fmt.Errorf("lds %q: api_listener type %q", l.GetName(), api.GetTypeUrl())
	}
	hcm := &hcmv3.HttpConnectionManager{}
	if err := api.UnmarshalTo(hcm); err != nil {
		return err
	}
	if hcm.GetXffNumTrustedHops() != 0 || len(hcm.GetOriginalIpDetectionExtensions()) != 0 {
		return fmt.Errorf("lds %q: xff_num_trusted_hops or original_ip_detection_extensions set", l.GetName())
	}
	rds := hcm.GetRds()
	if rds == nil {
		return fmt.Errorf("lds %q: not RDS", l.GetName())
	}
	if src := rds.GetConfigSource(); src.GetAds() == nil && src.GetSelf() == nil {
		return fmt.Errorf("lds %q: RDS config source is not ADS or self", l.GetName())
	}
	if rds.GetRouteConfigName() == "" {
		return fmt.Errorf("lds %q: empty route_config_name", l.GetName())
	}
	filters := hcm.GetHttpFilters()
	if len(filters) == 0 {
		return fmt.Errorf("lds %q: no http filters", l.GetName())
	}
	seen := map[string]bool{}
	for _, f := range filters {
		if f.GetName() == "" || seen[f.GetName()] {
			return fmt.Errorf("lds %q: empty or duplicate filter name %q", l.GetName(), f.GetName())
		}
		seen[f.GetName()] = true
	}
	// The router is grpc-go's only terminal filter, and it must come last.
	for i, f := range filters {
		isRouter := f.GetTypedConfig().MessageIs(&routerv3.Router{})
		if isRouter != (i == len(filters)-1) {
			return fmt.Errorf("lds %q: filter %d %q: the router must be the last filter and only there", l.GetName(), i, f.GetName())
		}
		if isRouter {
			if err := f.GetTypedConfig().UnmarshalTo(&routerv3.Router{}); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkGRPCRoute mirrors generateRDSUpdateFromRouteConfiguration and
// routesProtoToSlice, and the resolver's need for a "*" virtual host whose
// last route forwards to a named cluster.
func checkGRPCRoute(rc *routev3.RouteConfiguration) error {
	if rc.GetName() == "" {
		return errors.New("rds: empty name")
	}
	for _, vh := range rc.GetVirtualHosts() {
		if len(vh.GetDomains()) != 1 || vh.GetDomains()[0] != "*" {
			return fmt.Errorf("rds %q: domains %q, want [*]", rc.GetName(), vh.GetDomains())
		}
		if len(vh.GetRoutes()) == 0 {
			return fmt.Errorf("rds %q: virtual host without routes", rc.GetName())
		}
		for _, r := range vh.GetRoutes() {
			if r.GetMatch() == nil || r.GetMatch().GetPathSpecifier() == nil {
				return fmt.Errorf("rds %q: route without match or path specifier", rc.GetName())
			}
			if len(r.GetMatch().GetQueryParameters()) != 0 || r.GetRoute().GetCluster() == "" {
				return fmt.Errorf("rds %q: route ignored by grpc-go (query matchers or no cluster)", rc.GetName())
			}
			if r.GetRoute().GetRetryPolicy() != nil || len(r.GetTypedPerFilterConfig()) != 0 {
				return fmt.Errorf("rds %q: unchecked retry policy or filter override", rc.GetName())
			}
		}
	}
	if len(rc.GetVirtualHosts()) != 1 || len(rc.GetClusterSpecifierPlugins()) != 0 {
		return fmt.Errorf("rds %q: want one virtual host and no cluster specifier plugins", rc.GetName())
	}
	return nil
}

// grpcLBPolicies are the load_balancing_policy types grpc-go v1.85
// registers (xdslbregistry/converter).
var grpcLBPolicies = map[string]bool{
	"type.googleapis.com/envoy.extensions.load_balancing_policies.client_side_weighted_round_robin.v3.ClientSideWeightedRoundRobin": true,
	"type.googleapis.com/envoy.extensions.load_balancing_policies.ring_hash.v3.RingHash":                                            true,
	"type.googleapis.com/envoy.extensions.load_balancing_policies.pick_first.v3.PickFirst":                                          true,
	"type.googleapis.com/envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin":                                        true,
	"type.googleapis.com/envoy.extensions.load_balancing_policies.wrr_locality.v3.WrrLocality":                                      true,
	"type.googleapis.com/envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest":                                    true,
}

// checkGRPCCluster mirrors validateClusterAndConstructClusterUpdate.
func checkGRPCCluster(c *clusterv3.Cluster) error {
	if c.GetName() == "" {
		return errors.New("cds: empty name")
	}
	switch c.GetLbPolicy() {
	case clusterv3.Cluster_ROUND_ROBIN, clusterv3.Cluster_LEAST_REQUEST:
	case clusterv3.Cluster_RING_HASH:
		rh := c.GetRingHashLbConfig()
		if rh.GetHashFunction() != clusterv3.Cluster_RingHashLbConfig_XX_HASH ||
			rh.GetMinimumRingSize().GetValue() > rh.GetMaximumRingSize().GetValue() {
			return fmt.Errorf("cds %q: bad ring_hash_lb_config", c.GetName())
		}
	default:
		return fmt.Errorf("cds %q: lb_policy %v", c.GetName(), c.GetLbPolicy())
	}
	if c.GetLeastRequestLbConfig() != nil && c.GetLeastRequestLbConfig().GetChoiceCount().GetValue() < 2 {
		return fmt.Errorf("cds %q: choice_count < 2", c.GetName())
	}
	if lbp := c.GetLoadBalancingPolicy(); lbp != nil {
		if err := checkGRPCPolicyList(lbp, 0); err != nil {
			return fmt.Errorf("cds %q: %w", c.GetName(), err)
		}
	}
	if od := c.GetOutlierDetection(); od != nil && (od.GetMaxEjectionPercent().GetValue() > 100 ||
		od.GetInterval().AsDuration() < 0 || od.GetBaseEjectionTime().AsDuration() < 0 ||
		od.GetMaxEjectionTime().AsDuration() < 0 || od.GetEnforcingSuccessRate().GetValue() > 100 ||
		od.GetFailurePercentageThreshold().GetValue() > 100 || od.GetEnforcingFailurePercentage().GetValue() > 100) {
		return fmt.Errorf("cds %q: outlier_detection out of range (gRFC A50)", c.GetName())
	}
	if len(c.GetTransportSocketMatches()) != 0 || c.GetTransportSocket() != nil ||
		(c.GetLrsServer() != nil && c.GetLrsServer().GetSelf() == nil) {
		return fmt.Errorf("cds %q: unchecked security or LRS config", c.GetName())
	}
	if c.GetType() != clusterv3.Cluster_EDS {
		return fmt.Errorf("cds %q: type %v", c.GetName(), c.GetType())
	}
	if src := c.GetEdsClusterConfig().GetEdsConfig(); src.GetAds() == nil && src.GetSelf() == nil {
		return fmt.Errorf("cds %q: EDS config source is not ADS or self", c.GetName())
	}
	return nil
}

// checkGRPCPolicyList mirrors xdslbregistry.ConvertToServiceConfig: the
// first entry grpc-go supports is used and must convert.
func checkGRPCPolicyList(lbp *clusterv3.LoadBalancingPolicy, depth int) error {
	if depth > 15 {
		return errors.New("load_balancing_policy nested too deep")
	}
	for _, p := range lbp.GetPolicies() {
		cfg := p.GetTypedExtensionConfig().GetTypedConfig()
		if !grpcLBPolicies[cfg.GetTypeUrl()] {
			continue
		}
		switch {
		case cfg.MessageIs(&ringhashv3.RingHash{}):
			rh := &ringhashv3.RingHash{}
			if err := cfg.UnmarshalTo(rh); err != nil {
				return err
			}
			if rh.GetHashFunction() != ringhashv3.RingHash_XX_HASH {
				return fmt.Errorf("ring_hash hash function %v", rh.GetHashFunction())
			}
		case cfg.MessageIs(&wrrlocalityv3.WrrLocality{}):
			w := &wrrlocalityv3.WrrLocality{}
			if err := cfg.UnmarshalTo(w); err != nil {
				return err
			}
			return checkGRPCPolicyList(w.GetEndpointPickingPolicy(), depth+1)
		}
		return nil
	}
	return errors.New("no load_balancing_policy entry supported by grpc-go")
}

// checkGRPCLoadAssignment mirrors parseEDSRespProto and parseEndpoints.
// Where grpc-go only ignores a locality of weight 0, we fail: the
// endpoints would be lost.
func checkGRPCLoadAssignment(cla *endpointv3.ClusterLoadAssignment) error {
	if cla.GetClusterName() == "" {
		return errors.New("eds: empty cluster_name")
	}
	name := cla.GetClusterName()
	var localitySum uint64
	localities := map[string]bool{}
	addrs := map[string]bool{}
	for _, lle := range cla.GetEndpoints() {
		l := lle.GetLocality()
		if l == nil {
			return fmt.Errorf("eds %q: locality without a locality message", name)
		}
		if lle.GetPriority() != 0 {
			return fmt.Errorf("eds %q: priority %d", name, lle.GetPriority())
		}
		w := lle.GetLoadBalancingWeight().GetValue()
		if w == 0 {
			return fmt.Errorf("eds %q: locality %v has weight 0 (grpc-go ignores it)", name, l)
		}
		if localitySum += uint64(w); localitySum > math.MaxUint32 {
			return fmt.Errorf("eds %q: locality weights sum above MaxUint32", name)
		}
		key := l.GetRegion() + "\x00" + l.GetZone() + "\x00" + l.GetSubZone()
		if localities[key] {
			return fmt.Errorf("eds %q: duplicate locality %v", name, l)
		}
		localities[key] = true
		if err := checkGRPCEndpoints(name, lle.GetLbEndpoints(), addrs); err != nil {
			return err
		}
	}
	return nil
}

func checkGRPCEndpoints(name string, eps []*endpointv3.LbEndpoint, addrs map[string]bool) error {
	var sum uint64
	for _, ep := range eps {
		w := uint32(1)
		if ew := ep.GetLoadBalancingWeight(); ew != nil {
			if ew.GetValue() == 0 {
				return fmt.Errorf("eds %q: endpoint weight 0", name)
			}
			w = ew.GetValue()
		}
		if sum += uint64(w); sum > math.MaxUint32 {
			return fmt.Errorf("eds %q: endpoint weights of a locality sum above MaxUint32", name)
		}
		sa := ep.GetEndpoint().GetAddress().GetSocketAddress()
		addr := net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue())))
		if addrs[addr] {
			return fmt.Errorf("eds %q: duplicate endpoint address %s", name, addr)
		}
		addrs[addr] = true
		if _, ok := corev3.HealthStatus_name[int32(ep.GetHealthStatus())]; !ok {
			return fmt.Errorf("eds %q: health status %v", name, ep.GetHealthStatus())
		}
	}
	return nil
}
