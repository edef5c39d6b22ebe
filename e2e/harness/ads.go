package harness

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3" // resource types for Any
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// ADSUpdate is one response an ADSClient accepted.
//
// SotW: Resources is what the client has of the type once it applied the
// response: clusters and listeners are the response's (full state), load
// assignments and route configurations are merged by name from the
// responses that carry them (the xDS spec groups these per resource, and
// the server sends only what changed), and dropped when a response of
// clusters (listeners) no longer refers to them (as Envoy drops them with
// their cluster; only when the client subscribes to clusters, listeners).
// Delta: Resources is what the response carried. Carried names what the
// response itself carried, both protocols.
type ADSUpdate struct {
	TypeURL   string
	Version   string // SotW version_info, or delta system_version_info
	Resources map[string]*anypb.Any
	Carried   []string // names of the resources in the response, in its order
	Removed   []string // delta only
	// Versions are the delta resource versions (name -> version); nil for SotW.
	Versions map[string]string
	At       time.Time
}

// Resume is what a node that reconnects tells the server it already has of
// one type: SotW sends Version as version_info with Names as resource
// names (nil: wildcard); delta sends Versions as initial_resource_versions.
type Resume struct {
	Version  string
	Names    []string
	Versions map[string]string
}

// ADSConfig configures a raw ADS client: a plain gRPC stream, as a node
// would open it, without any xDS client library.
type ADSConfig struct {
	Conn    *grpc.ClientConn
	NodeID  string
	Cluster string
	Agent   string // node user_agent_name; "" means "xds-server-harness"
	// Metadata is the node's metadata; nil sends none.
	Metadata *structpb.Struct
	// Locality is the node's locality; nil sends none.
	Locality *core.Locality
	Delta    bool     // incremental (delta) protocol instead of state of the world
	Types    []string // type URLs to subscribe to, as wildcards
	// Resume, by type URL, makes the first request of a type resume from
	// what the node already has (see Resume); nil starts from nothing.
	Resume map[string]Resume
	// Reject, if set, decides whether to NACK a response (with that error).
	Reject func(ADSUpdate) error
}

// ADSClient is a minimal ADS client that subscribes to whole types,
// ACKs (or NACKs) every response and publishes what it accepted.
type ADSClient struct {
	cfg     ADSConfig
	updates chan ADSUpdate
	cancel  context.CancelFunc
	done    chan error
	mu      sync.Mutex
	err     error

	closeOnce sync.Once
	closeErr  error
}

// StartADS opens the stream and sends the initial subscriptions.
func StartADS(ctx context.Context, cfg ADSConfig) (*ADSClient, error) {
	ctx, cancel := context.WithCancel(ctx)
	c := &ADSClient{cfg: cfg, updates: make(chan ADSUpdate, 64), cancel: cancel, done: make(chan error, 1)}
	cli := discoverygrpc.NewAggregatedDiscoveryServiceClient(cfg.Conn)
	node := &core.Node{Id: cfg.NodeID, Cluster: cfg.Cluster, UserAgentName: cmp.Or(cfg.Agent, "xds-server-harness"), Metadata: cfg.Metadata,
		Locality: cfg.Locality}
	if cfg.Delta {
		st, err := cli.DeltaAggregatedResources(ctx)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("harness: open delta stream: %w", err)
		}
		for i, t := range cfg.Types {
			req := &discoverygrpc.DeltaDiscoveryRequest{TypeUrl: t, ResourceNamesSubscribe: []string{"*"},
				InitialResourceVersions: cfg.Resume[t].Versions}
			if i == 0 {
				req.Node = node
			}
			if err := st.Send(req); err != nil {
				cancel()
				return nil, fmt.Errorf("harness: subscribe: %w", err)
			}
		}
		go func() { c.done <- c.runDelta(st) }()
		return c, nil
	}
	st, err := cli.StreamAggregatedResources(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("harness: open stream: %w", err)
	}
	for i, t := range cfg.Types {
		r := cfg.Resume[t]
		req := &discoverygrpc.DiscoveryRequest{TypeUrl: t, VersionInfo: r.Version, ResourceNames: r.Names}
		if i == 0 {
			req.Node = node
		}
		if err := st.Send(req); err != nil {
			cancel()
			return nil, fmt.Errorf("harness: subscribe: %w", err)
		}
	}
	go func() { c.done <- c.runSotW(st) }()
	return c, nil
}

// Updates delivers accepted responses. Slow readers lose nothing: the
// client stops reading the stream while the channel is full.
func (c *ADSClient) Updates() <-chan ADSUpdate { return c.updates }

// Close ends the stream and waits for the client to stop. Later calls
// return the first call's result.
func (c *ADSClient) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.closeErr = <-c.done
	})
	return c.closeErr
}

func (c *ADSClient) runSotW(st discoverygrpc.AggregatedDiscoveryService_StreamAggregatedResourcesClient) error {
	versions := map[string]string{}
	for t, r := range c.cfg.Resume {
		versions[t] = r.Version
	}
	view := sotwView{}
	for {
		resp, err := st.Recv()
		if err != nil {
			return err
		}
		u := ADSUpdate{TypeURL: resp.GetTypeUrl(), Version: resp.GetVersionInfo(), At: time.Now()}
		carried := make(map[string]*anypb.Any, len(resp.GetResources()))
		for _, r := range resp.GetResources() {
			name := resourceName(r)
			carried[name] = r
			u.Carried = append(u.Carried, name)
		}
		ack := &discoverygrpc.DiscoveryRequest{TypeUrl: u.TypeURL, ResponseNonce: resp.GetNonce(), VersionInfo: u.Version}
		if c.cfg.Reject != nil {
			if rerr := c.cfg.Reject(u); rerr != nil {
				ack.VersionInfo = versions[u.TypeURL]
				ack.ErrorDetail = &statuspb.Status{Code: 3, Message: rerr.Error()}
			}
		}
		if ack.ErrorDetail == nil {
			versions[u.TypeURL] = u.Version
			u.Resources = view.apply(u.TypeURL, carried)
		}
		if err := st.Send(ack); err != nil {
			return err
		}
		if ack.ErrorDetail == nil {
			c.updates <- u
		}
	}
}

// referrer is the type whose resources refer to those of a type merged
// by name in SotW: clusters to load assignments, listeners to route
// configurations; merged maps each referring type back.
var (
	referrer = map[string]string{resource.EndpointType: resource.ClusterType, resource.RouteType: resource.ListenerType}
	merged   = map[string]string{resource.ClusterType: resource.EndpointType, resource.ListenerType: resource.RouteType}
)

// sotwView is what a SotW client has, by type and name (see ADSUpdate).
type sotwView map[string]map[string]*anypb.Any

// apply applies an accepted response of typeURL carrying carried (by
// name) and returns a copy of the type's view. Load assignments and route
// configurations are merged; those that no cluster (listener) refers to
// any longer are dropped when a response of clusters (listeners) arrives,
// as Envoy drops them with their cluster (listener).
func (v sotwView) apply(typeURL string, carried map[string]*anypb.Any) map[string]*anypb.Any {
	if _, isMerged := referrer[typeURL]; isMerged {
		cur := v[typeURL]
		if cur == nil {
			cur = map[string]*anypb.Any{}
			v[typeURL] = cur
		}
		maps.Copy(cur, carried)
		return maps.Clone(cur)
	}
	v[typeURL] = carried
	if dep, ok := merged[typeURL]; ok && v[dep] != nil {
		refs := references(typeURL, carried)
		maps.DeleteFunc(v[dep], func(name string, _ *anypb.Any) bool { return !refs[name] })
	}
	return maps.Clone(carried)
}

// references returns the names of the load assignments the clusters in
// res refer to (typeURL CDS), or of the route configurations the
// listeners in res refer to (LDS: through an http_connection_manager in
// a filter chain or an api_listener).
func references(typeURL string, res map[string]*anypb.Any) map[string]bool {
	out := map[string]bool{}
	for name, a := range res {
		switch typeURL {
		case resource.ClusterType:
			var c clusterv3.Cluster
			if a.UnmarshalTo(&c) != nil || c.GetType() != clusterv3.Cluster_EDS {
				continue
			}
			out[cmp.Or(c.GetEdsClusterConfig().GetServiceName(), name)] = true
		case resource.ListenerType:
			var l listenerv3.Listener
			if a.UnmarshalTo(&l) != nil {
				continue
			}
			hcms := []*anypb.Any{l.GetApiListener().GetApiListener()}
			for _, fc := range l.GetFilterChains() {
				for _, f := range fc.GetFilters() {
					hcms = append(hcms, f.GetTypedConfig())
				}
			}
			for _, h := range hcms {
				var hcm hcmv3.HttpConnectionManager
				if h != nil && h.MessageIs(&hcm) && h.UnmarshalTo(&hcm) == nil && hcm.GetRds() != nil {
					out[hcm.GetRds().GetRouteConfigName()] = true
				}
			}
		}
	}
	return out
}

func (c *ADSClient) runDelta(st discoverygrpc.AggregatedDiscoveryService_DeltaAggregatedResourcesClient) error {
	for {
		resp, err := st.Recv()
		if err != nil {
			return err
		}
		u := ADSUpdate{TypeURL: resp.GetTypeUrl(), Version: resp.GetSystemVersionInfo(), At: time.Now(),
			Resources: make(map[string]*anypb.Any, len(resp.GetResources())), Removed: resp.GetRemovedResources(),
			Versions: make(map[string]string, len(resp.GetResources()))}
		for _, r := range resp.GetResources() {
			u.Resources[r.GetName()] = r.GetResource()
			u.Versions[r.GetName()] = r.GetVersion()
			u.Carried = append(u.Carried, r.GetName())
		}
		ack := &discoverygrpc.DeltaDiscoveryRequest{TypeUrl: u.TypeURL, ResponseNonce: resp.GetNonce()}
		if c.cfg.Reject != nil {
			if rerr := c.cfg.Reject(u); rerr != nil {
				ack.ErrorDetail = &statuspb.Status{Code: 3, Message: rerr.Error()}
			}
		}
		if err := st.Send(ack); err != nil {
			return err
		}
		if ack.ErrorDetail == nil {
			c.updates <- u
		}
	}
}

// resourceName reads the name of a SotW resource without knowing its type.
func resourceName(a *anypb.Any) string {
	m, err := a.UnmarshalNew()
	if err != nil {
		return ""
	}
	type named interface{ GetName() string }
	type clusterNamed interface{ GetClusterName() string }
	switch r := m.(type) {
	case clusterNamed:
		return r.GetClusterName()
	case named:
		return r.GetName()
	}
	return ""
}
