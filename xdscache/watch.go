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
	// idle is the version of its type at which the watch was last found
	// to have nothing to send ("" if never; see skips).
	idle string
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
	// idle: as sotwWatch's.
	idle string
}

// skips reports whether a snapshot whose version of kind is version can
// be passed over by a watch of kind that was found to have nothing to
// send at idle: a type's version is a hash of its names and content
// hashes, so the type is the same, and so is the answer (nothing); what
// else it depends on (the node's past of the type, what the stream has)
// changes only with the type's version or with a request, which opens a
// new watch. A change of one service then costs a node's other types
// nothing.
func skips(idle string, snap *cache.Snapshot, kind types.ResponseType) bool {
	return idle != "" && kind >= 0 && kind < types.UnknownType && snap.Resources[kind].Version == idle
}

// versionOf is snap's version of kind ("" for an unknown kind).
func versionOf(snap *cache.Snapshot, kind types.ResponseType) string {
	if kind < 0 || kind >= types.UnknownType {
		return ""
	}
	return snap.Resources[kind].Version
}
