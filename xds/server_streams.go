package xds

import (
	"context"

	"github.com/envoyproxy/go-control-plane/pkg/server/sotw/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"

	"github.com/xds-server/xds-server/xdscache"
)

// streamServers are go-control-plane's stream servers over c, with ordered
// ADS: a SotW ADS stream takes its watches' answers from one channel, in
// the order the cache gives them (it orders them itself,
// xdscache/cache_order.go), instead of a reflect.Select over a channel per
// watch, rebuilt for each request (most of a stream's allocations).
func streamServers(ctx context.Context, c *xdscache.Cache, cb serverv3.Callbacks) serverv3.Server {
	return serverv3.NewServer(ctx, c, cb, sotw.WithOrderedADS())
}

// staticWindow is HTTP/2's initial flow-control window in bytes (RFC 9113
// §6.9.2): the server announces nothing else.
const staticWindow = 65535
