package envoy

import (
	"testing"

	maglevv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/maglev/v3"
	randomv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/random/v3"
	ringhashv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"
)

// Envoy 1.40 rejects a cluster that has a load_balancing_policy and the
// locality fields of common_lb_config ("load_balancing_policy cannot be
// combined with partial fields ... of common_lb_config"): with random and
// maglev, locality weighting goes into the policies themselves.
func TestLocalityWeightedWithPolicyList(t *testing.T) {
	for name, tc := range map[string]struct {
		policy LBPolicy
		list   bool
	}{
		"round_robin: common_lb_config":   {RoundRobin, false},
		"least_request: common_lb_config": {LeastRequest, false},
		"ring_hash: common_lb_config":     {RingHash, false},
		"random: in the policy":           {Random, true},
		"maglev: in the policies":         {Maglev, true},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := Cluster(Service{Name: "s", LBPolicy: tc.policy, Cluster: ClusterOptions{LocalityWeightedLB: true}})
			if err != nil {
				t.Fatal(err)
			}
			inCommon := c.GetCommonLbConfig().GetLocalityWeightedLbConfig() != nil
			if inCommon == tc.list {
				t.Errorf("common_lb_config locality_weighted_lb_config set: %v, want %v", inCommon, !tc.list)
			}
			if !tc.list {
				return
			}
			for _, p := range c.GetLoadBalancingPolicy().GetPolicies() {
				m, err := p.GetTypedExtensionConfig().GetTypedConfig().UnmarshalNew()
				if err != nil {
					t.Fatal(err)
				}
				var weighted bool
				switch m := m.(type) {
				case *randomv3.Random:
					weighted = m.GetLocalityLbConfig().GetLocalityWeightedLbConfig() != nil
				case *maglevv3.Maglev:
					weighted = m.GetLocalityWeightedLbConfig() != nil
				case *ringhashv3.RingHash:
					weighted = m.GetLocalityWeightedLbConfig() != nil
				default:
					continue // grpc-go's wrr_locality weighs localities by itself
				}
				if !weighted {
					t.Errorf("%s: not locality weighted", p.GetTypedExtensionConfig().GetName())
				}
			}
		})
	}
}

// NoPanic sets common_lb_config.healthy_panic_threshold to 0, with the
// lb_policy enum and with a load_balancing_policy list (Envoy 1.40 takes
// it beside the list and honours it: e2e TestEnvoyZoneDistributeFailover),
// and leaves Envoy's default without it.
func TestNoPanic(t *testing.T) {
	for _, p := range []LBPolicy{RoundRobin, LeastRequest, RingHash, Random, Maglev} {
		for _, noPanic := range []bool{false, true} {
			c, err := Cluster(Service{Name: "s", LBPolicy: p, Cluster: ClusterOptions{LocalityWeightedLB: true, NoPanic: noPanic}})
			if err != nil {
				t.Fatal(err)
			}
			got := c.GetCommonLbConfig().GetHealthyPanicThreshold()
			if noPanic != (got != nil && got.GetValue() == 0) || !noPanic && got != nil {
				t.Errorf("%s, NoPanic %v: healthy_panic_threshold %v", p, noPanic, got)
			}
			if noPanic && p == RoundRobin && c.GetCommonLbConfig().GetLocalityWeightedLbConfig() == nil {
				t.Errorf("%s: NoPanic dropped locality_weighted_lb_config", p)
			}
		}
	}
}
