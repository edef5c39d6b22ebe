package envoy

import (
	"errors"
	"fmt"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"
	clusterprovidedv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/cluster_provided/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	previoushostsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	previousprioritiesv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// AggregateSep joins the clusters of an aggregate cluster into its name:
// "web~v2+web~v1" tries web~v2 first, then web~v1.
const AggregateSep = "+"

// AggregateName is the name of the aggregate cluster of children.
func AggregateName(children []string) string {
	name := ""
	for i, c := range children {
		if i > 0 {
			name += AggregateSep
		}
		name += c
	}
	return name
}

// AggregateCluster returns the aggregate cluster (envoy.clusters.aggregate)
// of children, named AggregateName(children): Envoy lays the children's
// priorities end to end, so the first child takes the requests while it
// is healthy (spilling to the next as a priority does), and a retry whose
// policy excludes previous priorities (PolicyRetry.OtherCluster) goes to
// the next child. grpc-go serves an aggregate cluster the same way, but
// its retries keep to the priority picked first.
//
// cb are the aggregate's circuit breakers: Envoy charges a route's
// retries to the route's cluster, the aggregate, so its max_retries
// bounds the retries in flight (Envoy's default, 3, a busy route
// overflows: upstream_rq_retry_overflow, and the request fails).
func AggregateCluster(children []string, cb CircuitBreakers) (*clusterv3.Cluster, error) {
	if len(children) < 2 {
		return nil, errors.New("envoy: aggregate cluster: fewer than 2 clusters")
	}
	if slices.Contains(children, "") {
		return nil, errors.New("envoy: aggregate cluster: a cluster has an empty name")
	}
	cfg, err := anypb.New(&aggregatev3.ClusterConfig{Clusters: slices.Clone(children)})
	if err != nil {
		return nil, fmt.Errorf("envoy: aggregate cluster: %w", err)
	}
	name := AggregateName(children)
	lb, err := aggregateLB()
	if err != nil {
		return nil, fmt.Errorf("envoy: aggregate cluster: %w", err)
	}
	c := &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_ClusterType{ClusterType: &clusterv3.Cluster_CustomClusterType{Name: "envoy.clusters.aggregate", TypedConfig: cfg}},
		LoadBalancingPolicy:  lb,
		ConnectTimeout:       durationpb.New(defaultConnectTimeout),
		CircuitBreakers:      circuitBreakersProto(cb),
	}
	return validated(c, "cluster", name)
}

// aggregateLB is an aggregate cluster's load balancing policy: Envoy's
// cluster_provided (the aggregate picks a cluster, whose own policy
// picks a host), then round_robin for grpc-go, which NACKs lb_policy
// CLUSTER_PROVIDED and skips a policy it does not know for the next (it
// balances within the children by their own policies anyway, gRFC A75).
func aggregateLB() (*clusterv3.LoadBalancingPolicy, error) {
	cp, err := typedPolicy("envoy.load_balancing_policies.cluster_provided", &clusterprovidedv3.ClusterProvided{})()
	if err != nil {
		return nil, err
	}
	rr, err := typedPolicy("envoy.load_balancing_policies.round_robin", &roundrobinv3.RoundRobin{})()
	if err != nil {
		return nil, err
	}
	return &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{cp, rr}}, nil
}

// otherHostRetry makes a retry policy's attempts leave the hosts already
// tried (previous_hosts; up to 3 picks per attempt), as every policy
// route's retries do: a retry on the host that just failed rarely helps.
func otherHostRetry(rp *routev3.RetryPolicy) error {
	hosts, err := anypb.New(&previoushostsv3.PreviousHostsPredicate{})
	if err != nil {
		return fmt.Errorf("previous hosts: %w", err)
	}
	rp.RetryHostPredicate = []*routev3.RetryPolicy_RetryHostPredicate{{Name: "envoy.retry_host_predicates.previous_hosts",
		ConfigType: &routev3.RetryPolicy_RetryHostPredicate_TypedConfig{TypedConfig: hosts}}}
	rp.HostSelectionRetryMaxAttempts = 3
	return nil
}

// otherClusterRetry makes a retry policy's attempts also leave the
// priorities (of an aggregate cluster: the clusters) already tried.
func otherClusterRetry(rp *routev3.RetryPolicy) error {
	pri, err := anypb.New(&previousprioritiesv3.PreviousPrioritiesConfig{UpdateFrequency: 1})
	if err != nil {
		return fmt.Errorf("previous priorities: %w", err)
	}
	rp.RetryPriority = &routev3.RetryPolicy_RetryPriority{Name: "envoy.retry_priorities.previous_priorities",
		ConfigType: &routev3.RetryPolicy_RetryPriority_TypedConfig{TypedConfig: pri}}
	return nil
}
