package xds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xds-server/xds-server/certs"
)

// AuthzRule lets client certificates whose identity (a URI or DNS SAN)
// matches one of Identities claim the nodes whose id matches one of
// NodeIDs and whose cluster matches one of Clusters. Globs: '*' matches
// any run of characters; an empty NodeIDs or Clusters matches any.
type AuthzRule struct {
	Identities []string
	NodeIDs    []string
	Clusters   []string
}

func (r AuthzRule) allows(ids []string, node, cluster string) bool {
	return anyMatch(r.Identities, ids) &&
		(len(r.NodeIDs) == 0 || certs.MatchAny(r.NodeIDs, node)) &&
		(len(r.Clusters) == 0 || certs.MatchAny(r.Clusters, cluster))
}

func anyMatch(globs, ids []string) bool {
	for _, id := range ids {
		if certs.MatchAny(globs, id) {
			return true
		}
	}
	return false
}

// validateRules reports rules that can allow nothing.
func validateRules(rules []AuthzRule) error {
	var errs []error
	for i, r := range rules {
		if len(r.Identities) == 0 {
			errs = append(errs, fmt.Errorf("xds: authorization rule %d: no identities", i))
		}
		for _, g := range append(append(append([]string{}, r.Identities...), r.NodeIDs...), r.Clusters...) {
			if err := certs.CheckGlob(g); err != nil {
				errs = append(errs, fmt.Errorf("xds: authorization rule %d: a glob %v", i, err))
			}
		}
	}
	return errors.Join(errs...)
}

// streamKey tells state-of-the-world and delta streams apart: their ids
// are counted separately.
type streamKey struct {
	delta bool
	id    int64
}

// streamAuth is what the authorizer knows of one stream.
type streamAuth struct {
	ids     []string // identities of the client certificate; nil without one
	node    string   // the node id and cluster last allowed; checked again if they change
	cluster string
	allowed bool
}

// authz wraps the callbacks: it records the client certificate's
// identities when a stream opens and refuses, with PermissionDenied and
// before the request reaches the registry (so before anything is sent),
// a request whose node no rule allows for them.
type authz struct {
	serverv3.Callbacks
	rules  []AuthzRule
	denied prometheus.Counter
	log    *slog.Logger
	logs   *logLimiter // one refusal line a second per node (and logRate in all), with a suppressed count

	mu      sync.Mutex
	streams map[streamKey]*streamAuth
}

func newAuthz(next serverv3.Callbacks, rules []AuthzRule, reg prometheus.Registerer, log *slog.Logger) *authz {
	a := &authz{Callbacks: next, rules: rules, log: log, logs: newLogLimiter(time.Second), streams: map[streamKey]*streamAuth{},
		denied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xds_authz_denied_total",
			Help: "xDS streams refused because no xds.authorization rule lets the client certificate claim the node.",
		})}
	if reg != nil {
		reg.MustRegister(a.denied)
	}
	return a
}

func (a *authz) opened(ctx context.Context, k streamKey) {
	ids, _ := certs.GRPCPeer(ctx)
	a.mu.Lock()
	a.streams[k] = &streamAuth{ids: ids}
	a.mu.Unlock()
}

func (a *authz) closed(k streamKey) {
	a.mu.Lock()
	delete(a.streams, k)
	a.mu.Unlock()
}

// check returns nil if the stream's certificate may claim node n.
func (a *authz) check(k streamKey, n *core.Node) error {
	a.mu.Lock()
	st := a.streams[k]
	if st == nil {
		st = &streamAuth{}
		a.streams[k] = st
	}
	if n == nil && st.allowed {
		a.mu.Unlock()
		return nil // later requests may leave the node out
	}
	id, cluster := n.GetId(), n.GetCluster()
	if st.allowed && st.node == id && st.cluster == cluster {
		a.mu.Unlock()
		return nil
	}
	allowed := false
	for _, r := range a.rules {
		if r.allows(st.ids, id, cluster) {
			allowed = true
			break
		}
	}
	st.node, st.cluster, st.allowed = id, cluster, allowed
	ids := st.ids
	a.mu.Unlock()
	if allowed {
		return nil
	}
	a.denied.Inc()
	who := "no client certificate"
	if len(ids) > 0 {
		who = "identity " + strings.Join(ids, ", ")
	}
	if ok, suppressed := a.logs.allow(logRefused, clip(id), time.Now()); ok {
		a.log.Warn("xDS stream refused: no authorization rule allows this node for the client certificate",
			"node", clip(id), "cluster", clip(cluster), "identities", ids, "suppressed", suppressed)
	}
	return status.Errorf(codes.PermissionDenied, "xds: %s may not claim node %q (cluster %q): no xds.authorization rule allows it",
		who, clip(id), clip(cluster))
}

func (a *authz) OnStreamOpen(ctx context.Context, id int64, typ string) error {
	a.opened(ctx, streamKey{id: id})
	return a.Callbacks.OnStreamOpen(ctx, id, typ)
}

func (a *authz) OnDeltaStreamOpen(ctx context.Context, id int64, typ string) error {
	a.opened(ctx, streamKey{delta: true, id: id})
	return a.Callbacks.OnDeltaStreamOpen(ctx, id, typ)
}

func (a *authz) OnStreamClosed(id int64, n *core.Node) {
	a.closed(streamKey{id: id})
	a.Callbacks.OnStreamClosed(id, n)
}

func (a *authz) OnDeltaStreamClosed(id int64, n *core.Node) {
	a.closed(streamKey{delta: true, id: id})
	a.Callbacks.OnDeltaStreamClosed(id, n)
}

// passOn reports whether a request goes to the wrapped callbacks unchecked:
// an undecodable one or one whose node is over a bound, which they refuse
// with InvalidArgument (not PermissionDenied for an empty or huge node id).
func passOn(typeURL string, n *core.Node) bool {
	return malformed(typeURL) != nil || checkNode(n) != nil
}

func (a *authz) OnStreamRequest(id int64, req *discoverygrpc.DiscoveryRequest) error {
	if passOn(req.GetTypeUrl(), req.GetNode()) {
		return a.Callbacks.OnStreamRequest(id, req)
	}
	if err := a.check(streamKey{id: id}, req.GetNode()); err != nil {
		return err
	}
	return a.Callbacks.OnStreamRequest(id, req)
}

func (a *authz) OnStreamDeltaRequest(id int64, req *discoverygrpc.DeltaDiscoveryRequest) error {
	if passOn(req.GetTypeUrl(), req.GetNode()) {
		return a.Callbacks.OnStreamDeltaRequest(id, req)
	}
	if err := a.check(streamKey{delta: true, id: id}, req.GetNode()); err != nil {
		return err
	}
	return a.Callbacks.OnStreamDeltaRequest(id, req)
}
