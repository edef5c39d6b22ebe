package xdscache

import (
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
)

// sotwWatch is an open SotW watch.
type sotwWatch struct {
	req  *cache.Request
	sub  cache.Subscription
	out  chan cache.Response
	kind types.ResponseType
	ads  bool // an Envoy node's: named requests wait until they name every resource
	// resumed is what a resuming node has (see resumedSotW), once known:
	// the version map of the snapshot it resumed at, shared, read only.
	resumed map[string]string
	// referrerStale: the node's new stream first asked for clusters
	// (listeners) at another version than the snapshot's, so its load
	// assignments (route configurations) are not resumed (resume.go).
	referrerStale bool
}

// deltaWatch is an open delta watch.
type deltaWatch struct {
	req  *cache.DeltaRequest
	sub  cache.Subscription
	out  chan cache.DeltaResponse
	kind types.ResponseType
	// has is what the stream has, resolved when the watch opens (see
	// deltaHas); the stream's map does not change while the watch is open.
	has hasView
}
