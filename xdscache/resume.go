package xdscache

import (
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
)

// A node that reconnects (to this replica or to another one, which serves
// it the same bytes under the same versions) tells the server what it has:
// SotW, the version_info of each type; delta, initial_resource_versions.
// go-control-plane's stream servers start each stream knowing of nothing
// returned, so without the rules below every reconnect of a fleet would
// re-send everything; with them a resuming node is sent only what
// differs.

// resumedSotW returns what the node of w has of t's type when w is the
// first request of the type on its stream (no nonce, nothing returned)
// and its version_info is t's version: every resource of the type, at its
// current hash (t's version map, shared: read only). That holds for a
// wildcard request (it was sent all of them under that version) and, for
// an Envoy node (ADS), for a named one too (ADS answers only requests that
// name every resource). Otherwise nil. A named request of another node is
// left alone: the node got the names of its last request, and may name
// more now.
//
// A load assignment or route configuration an Envoy holds follows its
// cluster or listener: it drops one when the referrer goes, keeping the
// version_info. So load assignments (route configurations) are resumed
// only when the first cluster (listener) request of the node's new stream
// named the snapshot's version too, and no cluster (listener) response
// was made since (referrerStale, noted per node by noteResume and
// answerSotW): a node whose clusters lag, after a NACK for instance, may
// lack load assignments that the snapshot, back at the version it names,
// holds. Envoy asks for clusters first, so a plain reconnect resumes.
//
// Known limit (as before our own cache): a version_info says what the
// node had when it accepted that version, not what it dropped since. A
// node that, on a resumed stream and before any answer of the type on it,
// drops a load assignment or route configuration (its cluster or listener
// went: an Envoy stops naming it, a wildcard client forgets it) is taken
// to have it if the snapshot is back at that very version when its
// request is read. Once a stream was answered, the server's subscription
// state tracks what an Envoy drops, and the cache's answers keep an
// Envoy's version_info equal to the snapshot's and send a wildcard stream
// the full state after a drop (cache_sotw.go), so a later resume is sound.
func resumedSotW(w *sotwWatch, t snapType) map[string]string {
	req := w.req
	v := req.GetVersionInfo()
	if v == "" || v != t.version || req.GetResponseNonce() != "" || len(w.sub.ReturnedResources()) > 0 ||
		(!w.ads && !w.sub.IsWildcard()) || len(t.items) == 0 || w.referrerStale {
		return nil
	}
	if len(t.hashes) == len(t.items) {
		return t.hashes
	}
	return t.hashesOf(t.all())
}

// firstDelta reports whether w must be answered even with nothing in it:
// go-control-plane's rule for the first wildcard request of a stream (an
// empty answer lets a new Envoy finish initializing), but not when the
// request carries initial_resource_versions: a node that has resources is
// not new, and is sent only what differs.
func firstDelta(w *deltaWatch) bool {
	return w.sub.IsWildcard() && w.req.GetResponseNonce() == "" && len(w.req.GetInitialResourceVersions()) == 0
}

// referrerOf is the type whose resources name those of kind (clusters
// name load assignments, listeners route configurations), or -1.
func referrerOf(kind types.ResponseType) types.ResponseType {
	switch kind {
	case types.Endpoint:
		return types.Cluster
	case types.Route:
		return types.Listener
	}
	return -1
}

// noteResume records, from the first request of a cluster or listener
// SotW stream (no nonce), whether it named a version other than the
// snapshot's (answerSotW sets it when it answers one); see resumedSotW.
// Called with st locked.
func (st *nodeState) noteResume(kind types.ResponseType, req *cache.Request) {
	if (kind != types.Cluster && kind != types.Listener) || req.GetResponseNonce() != "" {
		return
	}
	st.stale[kind] = st.snap == nil || req.GetVersionInfo() != st.snap.GetVersion(req.GetTypeUrl())
}
