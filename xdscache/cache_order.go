package xdscache

import (
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
)

// Make before break, for Envoy nodes.
//
// Envoy applies a route configuration as soon as it arrives, and answers
// 503 for lack of a cluster (http.<prefix>.no_cluster, response flag NC)
// on a route whose cluster it does not have, or still warms: a new cluster
// warms until its load assignment arrives, which Envoy asks for only once
// it has the cluster. Responses of one type go out in type order, but a
// route sent in the same burst as a new cluster reaches Envoy before that
// cluster's load assignment (a reconnecting Envoy asks for every type at
// once). So an Envoy node's listener and route configuration watches are
// answered only once the node's streams have every cluster and every load
// assignment of its snapshot (an open watch of the type with nothing to
// send): a service and a route to it added in one change reach Envoy as
// clusters, load assignments, then listeners and routes. Only answers
// that carry resources wait (a removal goes at once). A held watch is
// answered when a cluster or load assignment watch of the node opens with
// nothing to send (Envoy's ACK), or at the next snapshot.
//
// Breaking goes the other way, and at run time it never happens: a
// service a route names keeps its cluster while it has no instances
// (listenerSet.withRouted), and routes change only with a restart. Known
// limit: an Envoy that reconnects to a process whose config dropped a
// route while the route's service left may lose the cluster a moment
// before the route (the new process cannot tell which routes it still
// has; a SotW cluster request says nothing of them).

// routing reports whether kind is held until the clusters are in place.
func routing(kind types.ResponseType) bool {
	return kind == types.Listener || kind == types.Route
}

// clustersInPlace reports whether the node's streams have every cluster
// and load assignment of its snapshot. A type the node never asked for
// (a client of listeners and routes alone) is not waited for.
func clustersInPlace(st *nodeState, fullState bool) bool {
	for _, kind := range [...]types.ResponseType{types.Cluster, types.Endpoint} {
		url, _ := cache.GetResponseTypeURL(kind)
		t := typeIn(st.snap, kind, url)
		if len(t.items) > 0 && st.asked[kind] && !streamHas(st, kind, t, fullState) {
			return false
		}
	}
	return true
}

// streamHas reports whether the node's open watch of kind (its stream's)
// has every resource of t at its current hash. When the node's latest
// cluster request rejected clusters (st.cdsRejected), the clusters are as
// settled as they will be until they change: a rejected cluster must not
// hold every listener back. Once the node rejected clusters (st.cdsNACK),
// it never asks for the load assignments of those it rejected: its load
// assignments are in place when those it asks for are current, or when it
// asks for none.
func streamHas(st *nodeState, kind types.ResponseType, t snapType, fullState bool) bool {
	if kind == types.Cluster && st.cdsRejected {
		return true
	}
	lax := kind == types.Endpoint && st.cdsNACK
	for _, w := range st.sotw {
		if w.kind == kind {
			resp, upToDate := sotwAnswer(w, st.snap, st.history(kind), fullState)
			return resp == nil && (upToDate || lax)
		}
	}
	for _, w := range st.delta {
		if w.kind == kind {
			subscribed := w.sub.SubscribedResources()
			for name := range t.items {
				if _, asked := subscribed[name]; lax && !asked {
					continue
				}
				if v, ok := w.has.get(name); !ok || v != t.hash(name) {
					return false
				}
			}
			return true
		}
	}
	// Between a response and its ACK, or never asked for (after a NACK,
	// maybe never will be).
	return lax
}

// noteRequest records that the node asked for kind, and, from a cluster
// request, whether the node rejected clusters on its stream (a NACK; a new
// stream starts over) and whether its latest cluster request is a NACK.
func (st *nodeState) noteRequest(kind types.ResponseType, nonce string, nack bool) {
	if kind == types.Cluster || kind == types.Endpoint {
		st.asked[kind] = true
	}
	if kind != types.Cluster {
		return
	}
	if nonce == "" {
		st.cdsNACK = false
	}
	st.cdsNACK = st.cdsNACK || nack
	st.cdsRejected = nack && nonce != ""
}

// isEnvoyDelta reports whether a delta watch is an Envoy node's.
func isEnvoyDelta(w *deltaWatch) bool { return IsEnvoyAgent(w.req.GetNode().GetUserAgentName()) }
