package envoy

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// defaultConnectTimeout is the cluster connect_timeout sent when
// Service.ConnectTimeout is 0.
const defaultConnectTimeout = time.Second

// Resources are the translated resources of a list of services, each slice
// in the order of the services.
type Resources struct {
	Clusters        []*clusterv3.Cluster
	LoadAssignments []*endpointv3.ClusterLoadAssignment
	Listeners       []*listenerv3.Listener
	Routes          []*routev3.RouteConfiguration
}

// Build translates every service into its Cluster, ClusterLoadAssignment,
// Listener and RouteConfiguration, in input order.
//
// The error joins one error per failing service (errors.Join); a service
// whose name repeats an earlier one fails too. On error the returned
// Resources still hold the services that translated, so a caller may choose
// to serve them.
func Build(services []Service) (Resources, error) {
	var (
		res  Resources
		errs []error
		seen = make(map[string]bool, len(services))
	)
	for _, s := range services {
		if s.Name != "" && seen[s.Name] {
			errs = append(errs, fmt.Errorf("envoy: service %q: duplicate service name", s.Name))
			continue
		}
		seen[s.Name] = true
		if err := validateService(s); err != nil {
			errs = append(errs, err)
			continue
		}
		c, err := Cluster(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cla, err := LoadAssignment(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		l, err := Listener(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rc, err := RouteConfig(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res.Clusters = append(res.Clusters, c)
		res.LoadAssignments = append(res.LoadAssignments, cla)
		res.Listeners = append(res.Listeners, l)
		res.Routes = append(res.Routes, rc)
	}
	return res, errors.Join(errs...)
}

// validateService checks every input field of s and joins all problems.
func validateService(s Service) error {
	var errs []error
	if err := validateName(s); err != nil {
		errs = append(errs, err)
	}
	if err := validateClusterFields(s); err != nil {
		errs = append(errs, err)
	}
	if err := validateEndpoints(s); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func validateName(s Service) error {
	if s.Name == "" {
		return errors.New("envoy: service name is empty")
	}
	return nil
}

// validateClusterFields checks the fields Cluster reads besides the name.
func validateClusterFields(s Service) error {
	var errs []error
	if _, err := ParseLBPolicy(string(s.LBPolicy)); err != nil {
		errs = append(errs, fmt.Errorf("envoy: service %q: %w", s.Name, err))
	}
	if s.ConnectTimeout < 0 {
		errs = append(errs, fmt.Errorf("envoy: service %q: connect_timeout %v is negative", s.Name, s.ConnectTimeout))
	}
	if err := s.Cluster.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("envoy: service %q: %w", s.Name, err))
	}
	return errors.Join(errs...)
}

// validateEndpoints checks the fields LoadAssignment reads. grpc-go NACKs
// a load assignment that lists one host:port twice, so that is an error.
func validateEndpoints(s Service) error {
	var errs []error
	seen := make(map[string]int, len(s.Endpoints))
	for i, e := range s.Endpoints {
		where := fmt.Sprintf("envoy: service %q: endpoint %d (id %q)", s.Name, i, e.ID)
		if e.Address == "" {
			errs = append(errs, fmt.Errorf("%s: address is empty", where))
		}
		if e.Port == 0 || e.Port > 65535 {
			errs = append(errs, fmt.Errorf("%s: port %d out of range [1, 65535]", where, e.Port))
		}
		if _, ok := healthStatuses[e.Health]; !ok {
			errs = append(errs, fmt.Errorf("%s: unknown health status %d", where, e.Health))
		}
		hostPort := net.JoinHostPort(e.Address, strconv.FormatUint(uint64(e.Port), 10))
		if j, dup := seen[hostPort]; dup && e.Address != "" {
			errs = append(errs, fmt.Errorf("%s: address %s already used by endpoint %d", where, hostPort, j))
			continue
		}
		seen[hostPort] = i
	}
	return errors.Join(errs...)
}

// validatable is implemented by every generated Envoy message.
type validatable interface {
	ValidateAll() error
}

// validated returns m if m.ValidateAll() passes and a wrapped error naming
// the resource kind and name otherwise.
func validated[M validatable](m M, kind, name string) (M, error) {
	if err := m.ValidateAll(); err != nil {
		var zero M
		return zero, fmt.Errorf("envoy: %s %q: %w", kind, name, err)
	}
	return m, nil
}

// adsConfigSource is a config source that points at the ADS stream.
func adsConfigSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
}

// marshalAny packs m deterministically, so that equal inputs give equal
// bytes (the xds layer hashes resources into versions).
func marshalAny(m proto.Message) (*anypb.Any, error) {
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, fmt.Errorf("envoy: pack %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return a, nil
}
