package xdscache

import (
	"context"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// State of the world (SotW) answers.
//
// The xDS spec groups SotW responses of every type but clusters and
// listeners like delta responses: a response of load assignments (EDS) or
// route configurations (RDS) carries the resources that changed, and the
// client keeps the others (Envoy handles EDS and RDS per resource;
// grpc-go skips "missing means deleted" for them). So an EDS or RDS
// response holds only the requested resources whose content hash differs
// from what the stream was last sent (or that it was never sent): a
// change of one service sends one load assignment, not all of them.
// Clusters and listeners (and any other type) are full state: every
// requested resource. With nodeCache.fullState every type is.
//
// Either way nothing is sent when nothing the node requested differs from
// what its stream has, with these exceptions:
//
//   - go-control-plane's: the first request of a type on a stream is
//     answered whenever its version_info is not the snapshot's (a node
//     learns that a type is empty, or that a named resource does not
//     exist), and a NACK whose version_info is not the snapshot's is
//     answered with everything requested (what the stream has is then
//     unknown); but a NACK of the clusters or listeners (full state) that
//     the snapshot still holds is not answered until they change, or the
//     node would reject the same resources again at once, for ever (Envoy
//     1.40 NACKed a rejected cluster 630 times a second). Such a node's
//     load assignments and route configurations may then lag behind
//     versions they will name again, so they are not resumed on its next
//     stream (resume.go). A NACK of load assignments or route
//     configurations is still answered;
//   - the version_info of wildcard subscriptions and of Envoy nodes
//     follows the snapshot's, which resuming relies on (resume.go): when
//     the version differs they are answered even if nothing they ask for
//     changed (the response then carries nothing);
//   - deletions, below.
//
// What a stream has is go-control-plane's subscription state: the server
// records the map a response reports (GetReturnedResources) when it sends
// it, so a response reports every resource the client then has (name ->
// content hash), not only those it carries. A wildcard stream's map is a
// single entry standing for the type's version map (versionKey).
//
// Deletions. A client drops a load assignment or route configuration
// when the cluster or listener that refers to it goes (Envoy and grpc-go
// then stop naming it). So what leaves the snapshot is forgotten from what
// a stream has: a named stream is answered (with what changed, maybe
// nothing) and no longer has it; a wildcard stream, which cannot stop
// naming anything, is sent the full state of the type (which also tells a
// client that reads it as full state). And a stream whose last response
// was made before one of them left (that response was on its way) may
// lack one that came back unchanged since: it is sent everything it asks
// for (holding tells, from the epoch stamped on what it has).

// sotwAnswer is w's answer from snap: nil when there is none yet, with
// upToDate when that is because the stream has what snap holds for it.
func sotwAnswer(w *sotwWatch, snap *cache.Snapshot, h history, fullState bool) (resp *sotwResponse, upToDate bool) {
	t := typeIn(snap, w.kind, w.req.GetTypeUrl())
	wildcard := w.sub.IsWildcard()
	subscribed := w.sub.SubscribedResources()
	if w.ads && !wildcard && !namesAll(subscribed, t) {
		return nil, false // ADS: wait for a request naming every resource
	}
	has, known := sotwHas(w, t, h)
	reqVersion := w.req.GetVersionInfo()
	first := w.req.GetResponseNonce() == "" && w.resumed == nil
	if !known || reqVersion != t.version && first {
		return sotwFull(w, t, h), false
	}
	changed, lost := sotwChanges(t, has, wildcard, subscribed)
	if w.req.GetErrorDetail() != nil && reqVersion != t.version {
		if len(changed) == 0 && !lost && !partial(w.kind) {
			// The node rejected the full state it would be sent again:
			// wait for a change (answering is a NACK loop, hundreds a
			// second). It does not have what snap holds.
			return nil, false
		}
		return sotwFull(w, t, h), false
	}
	// The version_info of a wildcard or an Envoy node must follow the
	// snapshot's even when nothing it asks for changed (a resource it
	// dropped left the snapshot): resumedSotW trusts it.
	behind := reqVersion != t.version && (wildcard || w.ads)
	switch {
	case len(changed) == 0 && !lost && !behind:
		return nil, true
	case fullState || !partial(w.kind) || wildcard && lost:
		return sotwFull(w, t, h), false // for a wildcard subscription that lost a resource, see above
	case wildcard:
		return t.sotwResponse(w.req, changed, t.whole(h.epoch)), false // it has all of them now
	}
	return sotwPartial(w, t, h, has, changed), false
}

// namesAll reports whether subscribed names every resource of t.
func namesAll(subscribed map[string]struct{}, t snapType) bool {
	for name := range t.items {
		if _, ok := subscribed[name]; !ok {
			return false
		}
	}
	return true
}

// sotwHas is what w's stream has of t (and whether that is known): its
// returned resources, or, on a new stream that has none, what it resumes
// with (resume.go).
func sotwHas(w *sotwWatch, t snapType, h history) (hasView, bool) {
	has, known := holding(w.sub.ReturnedResources(), t, h, partial(w.kind))
	if has.len() == 0 {
		if w.resumed == nil {
			w.resumed = resumedSotW(w, t)
		}
		if w.resumed != nil {
			has, known = hasView{m: w.resumed}, true
		}
	}
	return has, known
}

// sotwFull is a full response to w: every requested resource of t.
func sotwFull(w *sotwWatch, t snapType, h history) *sotwResponse {
	wildcard := w.sub.IsWildcard()
	names := t.requested(wildcard, w.sub.SubscribedResources())
	if wildcard {
		return t.sotwResponse(w.req, names, t.whole(h.epoch))
	}
	next := t.hashesOf(names)
	if partial(w.kind) {
		stamp(next, h.epoch)
	}
	return t.sotwResponse(w.req, names, next)
}

// sotwChanges are the requested resources of t that differ from what has
// holds, and whether one has left t.
func sotwChanges(t snapType, has hasView, wildcard bool, subscribed map[string]struct{}) (changed []string, lost bool) {
	if wildcard && has.shared && len(t.hashes) == len(t.items) {
		d := diffOf(has.m, t.hashes) // the same for the whole group (cache_memo.go)
		return d.changed, len(d.removed) > 0
	}
	return t.changed(wildcard, subscribed, has), t.lost(has)
}

// sotwPartial answers a named subscription with what changed; what left
// the snapshot is forgotten: its client drops it with its cluster or
// listener (see above).
func sotwPartial(w *sotwWatch, t snapType, h history, has hasView, changed []string) *sotwResponse {
	next := make(map[string]string, has.len()+len(changed))
	has.each(func(n, v string) {
		if _, ok := t.items[n]; ok {
			next[n] = v
		}
	})
	for _, n := range changed {
		next[n] = t.hash(n)
	}
	stamp(next, h.epoch)
	return t.sotwResponse(w.req, changed, next)
}

// sotwResponse implements cache.Response.
type sotwResponse struct {
	req      *cache.Request
	version  string
	t        snapType
	names    []string          // the resources it carries, sorted (read only: may be shared)
	returned map[string]string // every resource the client has once it got this one
	out      *discoverygrpc.DiscoveryResponse
}

var _ cache.Response = (*sotwResponse)(nil)

func (t snapType) sotwResponse(req *cache.Request, names []string, returned map[string]string) *sotwResponse {
	return &sotwResponse{req: req, version: t.version, t: t, names: names, returned: returned}
}

// GetDiscoveryResponse builds the response once (the stream server calls
// it once, then sets its nonce). Its resources are a slice shared by the
// responses that carry the same resources (cache_memo.go), so that the
// codec encodes them once for all of them.
func (r *sotwResponse) GetDiscoveryResponse() (*discoverygrpc.DiscoveryResponse, error) {
	if r.out != nil {
		return r.out, nil
	}
	url := r.req.GetTypeUrl()
	anys, err := anySlices.of(r.names, r.t.items, url, func() ([]*anypb.Any, error) {
		anys := make([]*anypb.Any, len(r.names))
		for i, n := range r.names {
			a, err := anyOf(r.t.items[n].Resource, url)
			if err != nil {
				return nil, err
			}
			anys[i] = a
		}
		return anys, nil
	})
	if err != nil {
		return nil, err
	}
	r.out = &discoverygrpc.DiscoveryResponse{VersionInfo: r.version, Resources: anys, TypeUrl: url}
	return r.out, nil
}

func (r *sotwResponse) GetRequest() *discoverygrpc.DiscoveryRequest { return r.req }
func (r *sotwResponse) GetVersion() (string, error)                 { return r.version, nil }
func (r *sotwResponse) GetResponseVersion() string                  { return r.version }
func (r *sotwResponse) GetReturnedResources() map[string]string     { return r.returned }
func (r *sotwResponse) GetContext() context.Context                 { return context.Background() }
