package xds

import (
	"context"
	"strings"

	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
)

// nodeCaches holds the snapshots of Envoy nodes and of the other
// (proxyless gRPC) nodes in two go-control-plane caches, and routes each
// request to the cache of its node's kind.
//
// Envoy's cache runs in ADS mode: responses go out in the order xDS asks
// for (clusters before endpoints, listeners before routes), and a named
// request is answered only once it names every resource of the type in
// the snapshot, which Envoy does (its snapshot holds exactly the routes of
// its listeners and the load assignments of its clusters). grpc-go names
// only what its channels use (one listener, its route, the clusters of
// that route), so in ADS mode a node holding more services than it dials
// would never be answered; its cache answers each request with the named
// resources it has.
type nodeCaches struct {
	envoy cache.SnapshotCache
	other cache.SnapshotCache
}

var _ cache.Cache = (*nodeCaches)(nil)

func newNodeCaches() *nodeCaches {
	return &nodeCaches{
		envoy: cache.NewSnapshotCache(true, cache.IDHash{}, nil),
		other: cache.NewSnapshotCache(false, cache.IDHash{}, nil),
	}
}

// of returns the cache of a node whose user agent name is agent.
func (c *nodeCaches) of(agent string) cache.SnapshotCache {
	if isEnvoyAgent(agent) {
		return c.envoy
	}
	return c.other
}

// CreateWatch implements cache.ConfigWatcher.
// A node resuming with the versions it has gets no answer unless
// something differs (see resumeSotW).
func (c *nodeCaches) CreateWatch(req *cache.Request, sub cache.Subscription, out chan cache.Response) (func(), error) {
	sc := c.of(req.GetNode().GetUserAgentName())
	return sc.CreateWatch(req, resumeSotW(sc, sc == c.envoy, req, sub), out)
}

// CreateDeltaWatch implements cache.ConfigWatcher.
// A node resuming with initial_resource_versions gets no answer unless
// something differs (see resumeDelta).
func (c *nodeCaches) CreateDeltaWatch(req *cache.DeltaRequest, sub cache.Subscription, out chan cache.DeltaResponse) (func(), error) {
	return c.of(req.GetNode().GetUserAgentName()).CreateDeltaWatch(resumeDelta(req), sub, out)
}

// Fetch implements cache.ConfigFetcher.
func (c *nodeCaches) Fetch(ctx context.Context, req *cache.Request) (cache.Response, error) {
	return c.of(req.GetNode().GetUserAgentName()).Fetch(ctx, req)
}

// setSnapshot gives node its snapshot in the cache of its kind.
func (c *nodeCaches) setSnapshot(node Node, snap *cache.Snapshot) error {
	return c.of(node.UserAgent).SetSnapshot(context.Background(), node.ID, snap)
}

// clear drops a node's snapshot from both caches.
func (c *nodeCaches) clear(id string) {
	c.envoy.ClearSnapshot(id)
	c.other.ClearSnapshot(id)
}

// GetSnapshot returns a node's snapshot from whichever cache holds it.
func (c *nodeCaches) GetSnapshot(id string) (cache.ResourceSnapshot, error) {
	if s, err := c.envoy.GetSnapshot(id); err == nil {
		return s, nil
	}
	return c.other.GetSnapshot(id)
}

// isEnvoyAgent reports whether a user_agent_name is Envoy's ("envoy").
func isEnvoyAgent(agent string) bool {
	name, _, _ := strings.Cut(agent, " ")
	return strings.EqualFold(name, "envoy")
}
