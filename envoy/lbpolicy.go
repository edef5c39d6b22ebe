package envoy

import (
	"fmt"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/common/v3"
	maglevv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/maglev/v3"
	randomv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/random/v3"
	ringhashv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	wrrlocalityv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Ring sizes sent with ring_hash (and as grpc-go's fallback for maglev):
// the defaults of both Envoy and grpc-go. Envoy and grpc-go reject a
// maximum above 8M entries.
const (
	ringHashMinSize = 1024
	ringHashMaxSize = 8 * 1024 * 1024
)

// lbPolicies lists the valid policies in the order error messages name them.
var lbPolicies = []LBPolicy{RoundRobin, LeastRequest, RingHash, Random, Maglev}

// ParseLBPolicy returns the policy named s. The match ignores case and
// surrounding spaces, so Envoy's enum spelling (ROUND_ROBIN) is accepted
// too; "" means RoundRobin. Any other name is an error that lists the valid
// ones.
func ParseLBPolicy(s string) (LBPolicy, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	if name == "" {
		return RoundRobin, nil
	}
	for _, p := range lbPolicies {
		if string(p) == name {
			return p, nil
		}
	}
	valid := make([]string, len(lbPolicies))
	for i, p := range lbPolicies {
		valid[i] = string(p)
	}
	return "", fmt.Errorf("envoy: unknown lb_policy %q (valid: %s)", s, strings.Join(valid, ", "))
}

// setLBPolicy sets the load-balancing fields of c for policy p.
//
// round_robin, least_request and ring_hash use the lb_policy enum, which
// Envoy and grpc-go both understand. grpc-go NACKs a cluster whose
// lb_policy is RANDOM or MAGLEV, so those two are sent as a
// load_balancing_policy list, whose first supported entry each client uses
// (it supersedes lb_policy): Envoy uses random or maglev; grpc-go skips
// them and uses the second entry, the policy it would use for round_robin
// (weighted localities, round robin inside each) or ring_hash. lb_policy
// then names that fallback, for clients that predate load_balancing_policy.
// Envoy refuses a cluster with both a load_balancing_policy and the locality
// fields of common_lb_config, so with a list, locality weighting (o's
// LocalityWeightedLB) is set in the policies' own configs instead.
func setLBPolicy(c *clusterv3.Cluster, p LBPolicy, o ClusterOptions) error {
	ring := o.RingHash
	var byLocality *commonv3.LocalityLbConfig_LocalityWeightedLbConfig
	if o.LocalityWeightedLB {
		byLocality = &commonv3.LocalityLbConfig_LocalityWeightedLbConfig{}
	}
	switch p {
	case RoundRobin:
		c.LbPolicy = clusterv3.Cluster_ROUND_ROBIN
	case LeastRequest:
		c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
	case RingHash:
		c.LbPolicy = clusterv3.Cluster_RING_HASH
		c.LbConfig = ringHashLBConfig(ring)
	case Random:
		c.LbPolicy = clusterv3.Cluster_ROUND_ROBIN
		random := &randomv3.Random{}
		if byLocality != nil {
			random.LocalityLbConfig = &commonv3.LocalityLbConfig{LocalityConfigSpecifier: &commonv3.LocalityLbConfig_LocalityWeightedLbConfig_{
				LocalityWeightedLbConfig: byLocality,
			}}
		}
		return setPolicyList(c,
			typedPolicy("envoy.load_balancing_policies.random", random),
			wrrLocalityRoundRobin)
	case Maglev:
		c.LbPolicy = clusterv3.Cluster_RING_HASH
		c.LbConfig = ringHashLBConfig(ring)
		return setPolicyList(c,
			typedPolicy("envoy.load_balancing_policies.maglev", &maglevv3.Maglev{LocalityWeightedLbConfig: byLocality}),
			typedPolicy("envoy.load_balancing_policies.ring_hash", &ringhashv3.RingHash{
				HashFunction:             ringhashv3.RingHash_XX_HASH,
				MinimumRingSize:          wrapperspb.UInt64(ring.ringMin()),
				MaximumRingSize:          wrapperspb.UInt64(ring.ringMax()),
				LocalityWeightedLbConfig: byLocality,
			}))
	default:
		_, err := ParseLBPolicy(string(p))
		return err
	}
	return nil
}

func ringHashLBConfig(ring RingHashSize) *clusterv3.Cluster_RingHashLbConfig_ {
	return &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{
		HashFunction:    clusterv3.Cluster_RingHashLbConfig_XX_HASH,
		MinimumRingSize: wrapperspb.UInt64(ring.ringMin()),
		MaximumRingSize: wrapperspb.UInt64(ring.ringMax()),
	}}
}

// policyFunc builds one entry of a load_balancing_policy list.
type policyFunc func() (*clusterv3.LoadBalancingPolicy_Policy, error)

// typedPolicy returns a policyFunc for the extension name configured by m.
func typedPolicy(name string, m proto.Message) policyFunc {
	return func() (*clusterv3.LoadBalancingPolicy_Policy, error) {
		a, err := marshalAny(m)
		if err != nil {
			return nil, err
		}
		return &clusterv3.LoadBalancingPolicy_Policy{
			TypedExtensionConfig: &corev3.TypedExtensionConfig{Name: name, TypedConfig: a},
		}, nil
	}
}

// wrrLocalityRoundRobin is what grpc-go makes of lb_policy ROUND_ROBIN:
// localities picked by weight, round robin among a locality's endpoints.
func wrrLocalityRoundRobin() (*clusterv3.LoadBalancingPolicy_Policy, error) {
	rr, err := typedPolicy("envoy.load_balancing_policies.round_robin", &roundrobinv3.RoundRobin{})()
	if err != nil {
		return nil, err
	}
	return typedPolicy("envoy.load_balancing_policies.wrr_locality", &wrrlocalityv3.WrrLocality{
		EndpointPickingPolicy: &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{rr}},
	})()
}

// setPolicyList sets c.LoadBalancingPolicy to the given entries, in order.
func setPolicyList(c *clusterv3.Cluster, entries ...policyFunc) error {
	lbp := &clusterv3.LoadBalancingPolicy{}
	for _, f := range entries {
		p, err := f()
		if err != nil {
			return fmt.Errorf("envoy: load_balancing_policy: %w", err)
		}
		lbp.Policies = append(lbp.Policies, p)
	}
	c.LoadBalancingPolicy = lbp
	return nil
}
