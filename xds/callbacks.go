package xds

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
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
}

// errShuttingDown ends streams opened during shutdown.
var errShuttingDown = status.Error(codes.Unavailable, "xds: server is shutting down; reconnect to another replica")

var _ serverv3.Callbacks = (*callbacks)(nil)

func (c *callbacks) OnStreamOpen(_ context.Context, _ int64, _ string) error {
	c.m.streams.WithLabelValues("sotw").Inc() // OnStreamClosed follows even on error
	return c.open()
}

func (c *callbacks) OnDeltaStreamOpen(_ context.Context, _ int64, _ string) error {
	c.m.streams.WithLabelValues("delta").Inc()
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
	c.closed(id)
}

func (c *callbacks) closed(stream int64) {
	if id, last := c.reg.detach(stream, c.now()); last {
		c.m.nodes.Set(float64(c.reg.connected()))
		c.log.Debug("node disconnected", "node", id)
		if node, ok := c.reg.get(id); ok {
			c.idx.release(node)
		}
	}
}

// request binds the stream to its node on the first request and gives a
// newly connected node its snapshot before go-control-plane opens the watch.
func (c *callbacks) request(stream int64, n *core.Node) string {
	id, fresh := c.reg.attach(stream, n, c.now())
	if fresh {
		c.m.nodes.Set(float64(c.reg.connected()))
		if node, ok := c.reg.get(id); ok {
			group, index, source := c.idx.assign(node)
			c.reg.setIndex(id, group, index, source)
		}
		node, _ := c.reg.get(id)
		c.log.Info("node connected", "node", id, "cluster", n.GetCluster(), "user_agent", n.GetUserAgentName(),
			"subset_group", node.Group, "subset_index", node.Index)
		c.rec.connected(id)
	}
	return id
}

func (c *callbacks) OnStreamRequest(stream int64, req *discoverygrpc.DiscoveryRequest) error {
	id := c.request(stream, req.GetNode())
	if req.GetErrorDetail() != nil {
		c.nack(id, req.GetTypeUrl(), req.GetVersionInfo(), req.GetErrorDetail().GetMessage())
	} else if req.GetVersionInfo() != "" {
		c.reg.ack(id, req.GetTypeUrl(), req.GetVersionInfo())
	}
	return nil
}

func (c *callbacks) OnStreamDeltaRequest(stream int64, req *discoverygrpc.DeltaDiscoveryRequest) error {
	id := c.request(stream, req.GetNode())
	if req.GetErrorDetail() != nil {
		c.nack(id, req.GetTypeUrl(), req.GetResponseNonce(), req.GetErrorDetail().GetMessage())
	}
	return nil
}

// nack records a rejected response. The node keeps its last good config and
// so do we: the cache is left alone, and the next change is pushed as usual.
func (c *callbacks) nack(node, typeURL, version, msg string) {
	c.m.nacks.WithLabelValues(typeName(typeURL)).Inc()
	c.reg.nack(node, NACK{At: c.now(), TypeURL: typeURL, Version: version, Error: msg})
	c.log.Warn("node rejected config (NACK)", "node", node, "type", typeName(typeURL), "version", version, "error_detail", msg)
}

func (c *callbacks) OnStreamResponse(_ context.Context, stream int64, _ *discoverygrpc.DiscoveryRequest, resp *discoverygrpc.DiscoveryResponse) {
	c.responded(stream, resp.GetTypeUrl())
}

func (c *callbacks) OnStreamDeltaResponse(stream int64, _ *discoverygrpc.DeltaDiscoveryRequest, resp *discoverygrpc.DeltaDiscoveryResponse) {
	c.responded(stream, resp.GetTypeUrl())
}

func (c *callbacks) responded(stream int64, typeURL string) {
	c.m.pushes.WithLabelValues(typeName(typeURL)).Inc()
	if id := c.reg.nodeOf(stream); id != "" {
		c.rec.pushed(id, typeURL)
	}
}

func (c *callbacks) OnFetchRequest(_ context.Context, _ *discoverygrpc.DiscoveryRequest) error {
	return nil
}

func (c *callbacks) OnFetchResponse(_ *discoverygrpc.DiscoveryRequest, _ *discoverygrpc.DiscoveryResponse) {
}
