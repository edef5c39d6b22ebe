package xds

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// callbacks feed go-control-plane's stream events into the registry, the
// reconciler and the metrics.
type callbacks struct {
	reg *registry
	rec *reconciler
	idx *indexer
	m   *metrics
	log *slog.Logger
	now func() time.Time
	// refusing, once true, makes new streams fail with Unavailable (the
	// server is shutting down); nil never refuses.
	refusing *atomic.Bool
	// logs lets through at most one connect, NACK or refusal line per
	// node per logEvery, and logRate a second of each over all nodes.
	logs *logLimiter
	// conns pairs each logged connect line with its disconnect line.
	conns *connLog
	// names bounds the resource names of streams and nodes (names.go).
	names *nameBook
	// snapshot returns a node's snapshot, nil if it has none.
	snapshot func(id string) *cache.Snapshot
	// evicted drops what the server holds of a node evicted from the
	// registry (past xds.max_known_nodes); nil does nothing.
	evicted  func(id string)
	maxKnown int                          // xds.max_known_nodes, for the log
	pushes   *perKind[prometheus.Counter] // m.pushes' children
}

// logEvery is the least time between two log lines about one node.
const logEvery = 10 * time.Second

// errShuttingDown ends streams opened during shutdown.
var errShuttingDown = status.Error(codes.Unavailable, "xds: server is shutting down; reconnect to another replica")

var _ serverv3.Callbacks = (*callbacks)(nil)

func (c *callbacks) OnStreamOpen(_ context.Context, id int64, typeURL string) error {
	c.m.streams.WithLabelValues("sotw").Inc() // OnStreamClosed follows even on error
	c.names.opened(id, typeURL)
	return c.open()
}

func (c *callbacks) OnDeltaStreamOpen(_ context.Context, id int64, typeURL string) error {
	c.m.streams.WithLabelValues("delta").Inc()
	c.names.opened(deltaStream(id), typeURL)
	return c.open()
}

func (c *callbacks) open() error {
	if c.refusing != nil && c.refusing.Load() {
		return errShuttingDown
	}
	return nil
}

func (c *callbacks) OnStreamClosed(id int64, _ *core.Node) {
	c.m.streams.WithLabelValues("sotw").Dec()
	c.closed(id)
}

func (c *callbacks) OnDeltaStreamClosed(id int64, _ *core.Node) {
	c.m.streams.WithLabelValues("delta").Dec()
	c.closed(deltaStream(id))
}

// deltaStream is the registry's key of a delta stream: go-control-plane
// numbers state-of-the-world and delta streams apart, each from 1, so
// delta ids are negated to keep the two apart.
func deltaStream(id int64) int64 { return -id }

func (c *callbacks) closed(stream int64) {
	c.names.closed(stream)
	if id, last := c.reg.detach(stream, c.now()); last {
		c.m.nodes.Dec() // Inc and Dec, not Set(connected()): two Sets can cross
		if d, ok := c.conns.disconnected(id, c.now()); ok {
			c.log.Info("node disconnected", "node", clip(id), "connected_for", d.Round(time.Millisecond))
		} else {
			c.m.logSuppressed.Inc()
		}
		// While the server shuts down its nodes leave all at once: the
		// index table's Close lets go of every index this replica holds
		// in one write, where a release each would queue thousands of
		// writes and hold up the stop.
		if node, ok := c.reg.get(id); ok && (c.refusing == nil || !c.refusing.Load()) {
			c.idx.release(node)
			c.reattached(id)
		}
	}
}

// reattached takes the index of a node back after its release when a
// stream of it attached since its last one closed: that stream acquired
// the index before the release marked it free, which would let another
// node take it once reserved no more.
func (c *callbacks) reattached(id string) {
	if node, ok := c.reg.get(id); ok && node.Streams > 0 {
		c.idx.hold(node)
	}
}

// request binds the stream to its node on the first request and gives a
// newly connected node its snapshot before go-control-plane opens the watch.
// A node over a bound (checkNode) or past subsetting.max_groups is refused
// with the status it returns; nothing of it is kept.
func (c *callbacks) request(stream int64, n *core.Node) (string, error) {
	if id := c.reg.nodeOf(stream); id != "" {
		return id, nil // bound: one lookup for each ACK, no lock for the fleet
	}
	if n != nil {
		if err := checkNode(n); err != nil {
			return "", c.refuse("node_too_large", n, err)
		}
	}
	id, fresh, evicted, err := c.reg.attach(stream, n, c.now())
	if evicted.ID != "" {
		c.evict(evicted)
	}
	if err != nil {
		return "", c.refuse("max_known_nodes", n, err)
	}
	if !fresh {
		return id, nil
	}
	node, _ := c.reg.get(id)
	group, index, source, err := c.idx.place(node)
	if err != nil {
		c.reg.refuse(stream, c.now())
		return "", c.refuse("max_groups", n, err)
	}
	c.reg.setIndex(id, group, index, source)
	c.m.nodes.Inc()
	if c.allowLog(id) {
		c.log.Info("node connected", "node", clip(id), "cluster", clip(n.GetCluster()), "user_agent", clip(n.GetUserAgentName()),
			"subset_group", clip(group), "subset_index", index)
		c.conns.connected(id, c.now())
	}
	c.rec.connected(id)
	return id, nil
}

// evict drops a node the registry evicted to make room for another,
// and frees its index reservation.
func (c *callbacks) evict(node Node) {
	id := node.ID
	c.idx.evict(node)
	if c.evicted != nil {
		c.evicted(id)
	}
	c.m.evicted.Inc()
	if ok, suppressed := c.logs.allow(logEvicted, "", c.now()); ok {
		c.log.Info("node evicted", "node", clip(id), "reason", "xds.max_known_nodes reached, evicting the node disconnected the longest",
			"max_known_nodes", c.maxKnown, "suppressed", suppressed)
	} else {
		c.m.logSuppressed.Inc()
	}
}

// refuse counts and logs (rate-limited) a refused stream and returns err.
func (c *callbacks) refuse(reason string, n *core.Node, err error) error {
	c.m.refused.WithLabelValues(reason).Inc()
	if ok, suppressed := c.logs.allow(logRefused, clip(n.GetId()), c.now()); ok {
		c.log.Warn("node refused", "node", clip(n.GetId()), "cluster", clip(n.GetCluster()), "error", err,
			"suppressed", suppressed)
	} else {
		c.m.logSuppressed.Inc()
	}
	return err
}

// allowLog reports whether a line about node may be logged now.
func (c *callbacks) allowLog(node string) bool {
	ok, _ := c.logs.allow(logConnect, node, c.now())
	if !ok {
		c.m.logSuppressed.Inc()
	}
	return ok
}

func (c *callbacks) OnStreamRequest(stream int64, req *discoverygrpc.DiscoveryRequest) error {
	in := incoming{stream: stream, node: req.GetNode(), typeURL: req.GetTypeUrl()}
	in.names = func(id string) *refusal {
		return c.names.sotw(stream, id, req.GetTypeUrl(), req.GetResourceNames(), c.snapshotIfNamed(id, req.GetResourceNames()))
	}
	if req.GetErrorDetail() != nil {
		in.nack = &NACK{TypeURL: req.GetTypeUrl(), Version: req.GetVersionInfo(), Nonce: req.GetResponseNonce(),
			Error: req.GetErrorDetail().GetMessage()}
	}
	_, err := c.admit(in)
	if err == nil && in.nack == nil && req.GetVersionInfo() != "" {
		c.reg.ack(stream, req.GetTypeUrl(), req.GetVersionInfo())
	}
	return err
}

func (c *callbacks) OnStreamDeltaRequest(stream int64, req *discoverygrpc.DeltaDiscoveryRequest) error {
	stream = deltaStream(stream)
	in := incoming{stream: stream, node: req.GetNode(), typeURL: req.GetTypeUrl()}
	in.names = func(id string) *refusal {
		return c.names.delta(stream, id, req.GetTypeUrl(), req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe(),
			len(req.GetInitialResourceVersions()), c.snapshotIfNamed(id, req.GetResourceNamesSubscribe()))
	}
	if req.GetErrorDetail() != nil {
		in.nack = &NACK{TypeURL: req.GetTypeUrl(), Version: req.GetResponseNonce(), Nonce: req.GetResponseNonce(),
			Error: req.GetErrorDetail().GetMessage()}
	}
	_, err := c.admit(in)
	if err == nil {
		trimInitial(req)
	}
	return err
}

// snapshotIfNamed is the node's snapshot, which the names check reads to
// tell known names from unknown ones, when names has one; nil when it has
// none (a wildcard ACK, most requests): the check then needs none, and
// the node's cache entry is not looked up.
func (c *callbacks) snapshotIfNamed(id string, names []string) *cache.Snapshot {
	for _, n := range names {
		if n != "*" {
			return c.snapshot(id)
		}
	}
	return nil
}

// incoming is a request of either protocol, as admit needs it.
type incoming struct {
	stream  int64
	node    *core.Node
	typeURL string
	names   func(id string) *refusal // checks the names it subscribes to (names.go)
	nack    *NACK                    // what it rejects; nil for a first request or an ACK
}

// admit is what a request of either protocol goes through: refused when
// its type is malformed, its node too large or unknown past the bounds,
// or its names over the limits; else its node's extensions are forgotten
// and a NACK it carries is recorded. It returns the node's id.
func (c *callbacks) admit(in incoming) (string, error) {
	if err := malformed(in.typeURL); err != nil {
		return "", c.refuse("malformed", in.node, err)
	}
	id, err := c.request(in.stream, in.node)
	if err != nil {
		return "", err
	}
	if r := in.names(id); r != nil {
		return "", c.refuseNames(id, r)
	}
	forgetExtensions(in.node)
	if in.nack != nil {
		c.nack(in.stream, id, *in.nack)
	}
	return id, nil
}

// refuseNames counts and logs (rate-limited per node) a request refused
// for its resource names (names.go) and returns the status ending its stream.
func (c *callbacks) refuseNames(node string, r *refusal) error {
	c.m.namesRefused.WithLabelValues(r.reason).Inc()
	if ok, suppressed := c.logs.allow(logRefused, clip(node), c.now()); ok {
		c.log.Warn("resource names refused", "node", clip(node), "reason", r.reason, "error", r.err, "suppressed", suppressed)
	} else {
		c.m.logSuppressed.Inc()
	}
	return r.err
}

// subscribed refuses a delta stream whose subscriptions of typeURL add up
// to n names, over xds.max_resource_names (nodeCache.subscribed).
func (c *callbacks) subscribed(node, typeURL string, n int) error {
	if l := c.names.limits.PerStream; l > 0 && n > l {
		return c.refuseNames(node, tooMany(typeURL, n, l))
	}
	return nil
}

// forgetExtensions drops the list of extensions a node says it was built
// with (node.extensions: Envoy 1.40 sends its few hundred, with their type
// URLs, in every state-of-the-world request): nothing here reads it, and
// go-control-plane keeps the node of each type's last request for the
// stream's life, which made a real Envoy cost the server about 700 KiB of
// heap instead of tens (BenchmarkEnvoyFleet, issue 23).
func forgetExtensions(n *core.Node) {
	if n != nil {
		n.Extensions = nil
	}
}

// nack records a rejected response. The node keeps its last good config and
// so do we: the cache is left alone, and the next change is pushed as usual.
// Only a NACK of the latest response of its type on the stream, once, is
// processed; repeats and NACKs of other nonces (stale or made up) are only
// counted. The log line is rate-limited per node and its texts clipped.
func (c *callbacks) nack(stream int64, node string, n NACK) {
	if !c.reg.freshNACK(stream, n.TypeURL, n.Nonce) {
		c.m.nacksIgnored.Inc()
		return
	}
	n.At = c.now()
	n.TypeURL, n.Version, n.Nonce = clip(n.TypeURL), clip(n.Version), clip(n.Nonce)
	c.reg.nack(node, n)
	c.m.nacks.WithLabelValues(knownType(n.TypeURL)).Inc()
	ok, suppressed := c.logs.allow(logNACK, node, n.At)
	if !ok {
		c.m.logSuppressed.Inc()
		return
	}
	c.log.Warn("node rejected config (NACK)", "node", clip(node), "type", knownType(n.TypeURL), "version", clip(n.Version),
		"error_detail", clip(n.Error), "suppressed", suppressed)
}

func (c *callbacks) OnStreamResponse(_ context.Context, stream int64, _ *discoverygrpc.DiscoveryRequest, resp *discoverygrpc.DiscoveryResponse) {
	c.responded(stream, resp.GetTypeUrl(), resp.GetNonce())
}

func (c *callbacks) OnStreamDeltaResponse(stream int64, _ *discoverygrpc.DeltaDiscoveryRequest, resp *discoverygrpc.DeltaDiscoveryResponse) {
	c.responded(deltaStream(stream), resp.GetTypeUrl(), resp.GetNonce())
}

func (c *callbacks) responded(stream int64, typeURL, nonce string) {
	id := c.reg.responded(stream, typeURL, nonce)
	c.pushes.get(typeURL).Inc()
	if id != "" {
		c.rec.pushed(id, typeURL)
	}
	logPush(c.log, id, typeURL, nonce)
}

func (c *callbacks) OnFetchRequest(_ context.Context, _ *discoverygrpc.DiscoveryRequest) error {
	return nil
}

func (c *callbacks) OnFetchResponse(_ *discoverygrpc.DiscoveryRequest, _ *discoverygrpc.DiscoveryResponse) {
}
