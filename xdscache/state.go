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
	// sent is, per kind, the version maps last reported to wildcard delta
	// streams by tag (see deltaTag).
	sent [len(Kinds)]sentMaps
}

// sentMaps are the version maps last reported to a node's wildcard delta
// streams of one kind, each by the tag its stream holds under versionKey
// (a stream holds a map of one entry, not a copy of the type's version
// map, the same for every node of a group). A stream holds the tag of the
// last response made for it, so a node with up to len(sentMaps) streams
// of a kind at once (a reconnect overlapping the old stream) finds each
// stream's map here.
type sentMaps [2]struct {
	tag    string
	hashes map[string]string // a snapshot's version map: shared, read only
}

// add records that tag stands for hashes, evicting the oldest record.
func (s *sentMaps) add(tag string, hashes map[string]string) {
	switch tag {
	case s[0].tag:
		return
	case s[1].tag:
		s[0], s[1] = s[1], s[0]
		return
	}
	s[1] = s[0]
	s[0].tag, s[0].hashes = tag, hashes
}

// find returns the version map tag stands for.
func (s *sentMaps) find(tag string) (map[string]string, bool) {
	for _, e := range s {
		if e.tag == tag && tag != "" {
			return e.hashes, true
		}
	}
	return nil, false
}

// sentOf is the sentMaps of kind, nil for a kind not ours.
func (st *nodeState) sentOf(kind types.ResponseType) *sentMaps {
	if kind < 0 || int(kind) >= len(st.sent) {
		return nil
	}
	return &st.sent[kind]
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
