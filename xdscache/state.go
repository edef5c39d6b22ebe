package xdscache

import (
	"strings"
	"sync"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
)

// nodeState is one node's snapshot and open watches.
type nodeState struct {
	mu    sync.Mutex
	snap  *cache.Snapshot // nil until the reconciler sets one
	gone  bool            // cleared and out of nodes: use a new state
	sotw  []*sotwWatch    // open SotW watches, in type order
	delta []*deltaWatch   // open delta watches, in type order
	// past is, per kind, what a stream's versionKey is resolved with:
	// the type before its last change (a stream one version behind has
	// it; only the version and the shared version map are kept), the
	// snapshot count and when a resource of the type last left.
	past  [len(Kinds)]history
	epoch uint64 // snapshots set
	// cdsNACK: the node rejected clusters on its stream; asked: the
	// cluster and load assignment types it asked for; held: a listener or
	// route answer waits for them (cache_order.go).
	// cdsRejected: the latest cluster request was a NACK.
	cdsNACK, cdsRejected, held bool
	asked                      [len(Kinds)]bool
	// stale: per referrer kind, the first request of the node's latest
	// SotW stream named another version than the snapshot's (resume.go).
	stale [len(Kinds)]bool
	// dsync is, per kind, the version map a wildcard delta stream was last
	// sent in full (see deltaSync).
	dsync [len(Kinds)]deltaSync
}

// deltaSync records that the delta stream whose returned-resources map is
// has (the next map of the response that made it, by identity, holding n
// entries) holds exactly the version map from. While the stream keeps
// that map untouched (go-control-plane changes it only on a request that
// subscribes or unsubscribes, which clears this record), its next answer
// is the group's shared diff from -> to (cache_memo.go), not a walk over
// its map.
type deltaSync struct {
	has  map[string]string
	n    int
	from map[string]string
}

// syncOf is the deltaSync of kind, nil for a kind not ours.
func (st *nodeState) syncOf(kind types.ResponseType) *deltaSync {
	if kind < 0 || int(kind) >= len(st.dsync) {
		return nil
	}
	return &st.dsync[kind]
}

// history is past for a kind, if one of ours.
func (st *nodeState) history(kind types.ResponseType) history {
	if kind < 0 || int(kind) >= len(st.past) {
		return history{epoch: st.epoch}
	}
	h := st.past[kind]
	h.epoch = st.epoch
	return h
}

// IsEnvoyAgent reports whether a user_agent_name is Envoy's ("envoy").
func IsEnvoyAgent(agent string) bool {
	name, _, _ := strings.Cut(agent, " ")
	return strings.EqualFold(name, "envoy")
}
