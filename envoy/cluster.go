package envoy

import (
	"errors"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Cluster returns the EDS cluster of s: its endpoints come from the
// ClusterLoadAssignment named s.Name over ADS, its load-balancing policy is
// s.LBPolicy (see ParseLBPolicy) and its connect_timeout is
// s.ConnectTimeout (1s when 0), and s.Cluster adds the optional settings
// (see ClusterOptions). s.Endpoints are not read.
func Cluster(s Service) (*clusterv3.Cluster, error) {
	if err := errors.Join(validateName(s), validateClusterFields(s)); err != nil {
		return nil, err
	}
	policy, _ := ParseLBPolicy(string(s.LBPolicy)) // checked above
	timeout := s.ConnectTimeout
	if timeout == 0 {
		timeout = defaultConnectTimeout
	}
	c := &clusterv3.Cluster{
		Name:                 s.Name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{
			EdsConfig:   adsConfigSource(),
			ServiceName: s.Name,
		},
		ConnectTimeout: durationpb.New(timeout),
	}
	if err := setLBPolicy(c, policy, s.Cluster); err != nil {
		return nil, err
	}
	if err := applyClusterOptions(c, s.Cluster); err != nil {
		return nil, err
	}
	return validated(c, "cluster", s.Name)
}
