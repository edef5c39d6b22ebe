package xds

import (
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"
)

// A node that reconnects (to this replica or to another one, which serves
// it the same bytes under the same versions) tells the server what it has:
// SotW, the version_info of each type; delta, initial_resource_versions.
// go-control-plane v0.14 answers the first request of a type on a new
// stream anyway: SotW, because a new stream's subscription knows of nothing
// returned; delta, because it always answers a first wildcard request (an
// empty answer lets a new Envoy finish initializing). So every reconnect
// of a fleet re-sent everything. The two functions below tell the cache
// what a resuming node has, so it answers only what differs.

// resumedNonce stands in for the nonce of a resumed delta request's
// predecessor (on a stream that had none); nothing reads it back.
const resumedNonce = "resumed"

// resumeSotW returns sub, or, for the first request of a type on a stream
// (no nonce yet) whose version_info is the version of that type in the
// node's snapshot, sub knowing that the node has every resource of the
// type. That holds for a wildcard request (it was sent all of them under
// that version) and, in ADS mode (ads: Envoy's cache), for a named one too
// (ADS answers only requests that name every resource). A named request
// in the other cache is left alone: the node got the names of its last
// request, and may name more now.
func resumeSotW(sc cache.SnapshotCache, ads bool, req *cache.Request, sub cache.Subscription) cache.Subscription {
	v := req.GetVersionInfo()
	if v == "" || req.GetResponseNonce() != "" || len(sub.ReturnedResources()) > 0 || (!ads && !sub.IsWildcard()) {
		return sub
	}
	snap, err := sc.GetSnapshot(req.GetNode().GetId())
	if err != nil || snap.GetVersion(req.GetTypeUrl()) != v {
		return sub // no snapshot yet: the cache compares versions when it comes
	}
	res := snap.GetResources(req.GetTypeUrl())
	has := make(map[string]string, len(res))
	for name := range res {
		has[name] = v
	}
	return resumedSub{Subscription: sub, has: has}
}

// resumedSub is a subscription whose node already has the resources in has.
type resumedSub struct {
	cache.Subscription
	has map[string]string // resource name -> SotW version
}

func (s resumedSub) ReturnedResources() map[string]string { return s.has }

// resumeDelta returns req, or, for the first request of a type on a stream
// that carries initial_resource_versions, a copy marked as following a
// response, so that the cache answers only resources that differ from the
// node's (or that it must remove), and sends no empty answer. A first
// request without initial versions is a node with nothing (or a new one):
// it still gets its answer, empty or not.
func resumeDelta(req *cache.DeltaRequest) *cache.DeltaRequest {
	if req.GetResponseNonce() != "" || len(req.GetInitialResourceVersions()) == 0 {
		return req
	}
	r := proto.Clone(req).(*cache.DeltaRequest)
	r.ResponseNonce = resumedNonce
	return r
}
