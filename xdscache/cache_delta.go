package xdscache

import (
	"context"
	"maps"
	"slices"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
)

// Delta answers, as go-control-plane's cache gives them (pkg/cache/v3
// delta.go), but from the snapshot's precomputed hashes: no resource is
// hashed per node. A wildcard subscription gets every resource whose
// hash differs from what its stream has, and the removal of those it has
// that left the snapshot; a named one the same over the names it
// subscribes to. Nothing is sent when nothing differs, except the first
// answer of a wildcard subscription (see firstDelta).

// deltaAnswer is w's answer from snap; nil when the stream has what snap
// holds for it. sync (may be nil) is the node's record of a wildcard
// stream that holds a whole version map: it is read, and updated when the
// answer gives the stream the whole of snap's.
func deltaAnswer(w *deltaWatch, snap *cache.Snapshot, sync *deltaSync) *deltaResponse {
	t := typeIn(snap, w.kind, w.req.GetTypeUrl())
	has := w.sub.ReturnedResources()
	wildcard := w.sub.IsWildcard()
	subscribed := w.sub.SubscribedResources()
	whole := len(t.hashes) == len(t.items) // the version map names every item
	var send, removed []string
	switch {
	case wildcard && whole && sync != nil && sync.has != nil && len(has) == sync.n && mapID(has) == mapID(sync.has):
		d := diffOf(sync.from, t.hashes) // the same for the whole group
		send, removed = d.changed, d.removed
		if len(send) == 0 && len(removed) == 0 && !firstDelta(w) {
			return nil
		}
		next := maps.Clone(t.hashes)
		*sync = deltaSync{has: next, n: len(next), from: t.hashes}
		return &deltaResponse{req: w.req, version: t.version, t: t, send: send, removed: removed, next: next}
	case wildcard:
		send = t.changed(true, nil, hasView{m: has})
		for name := range has {
			if _, ok := t.items[name]; !ok {
				removed = append(removed, name)
			}
		}
	default:
		send = t.changed(false, subscribed, hasView{m: has})
		for name := range subscribed {
			if _, ok := t.items[name]; !ok {
				if _, had := has[name]; had {
					removed = append(removed, name)
				}
			}
		}
	}
	if len(send) == 0 && len(removed) == 0 && !firstDelta(w) {
		return nil
	}
	slices.Sort(removed)
	var next map[string]string
	if wildcard {
		next = t.hashesOf(t.all())
		if sync != nil && whole {
			*sync = deltaSync{has: next, n: len(next), from: t.hashes}
		}
	} else {
		next = make(map[string]string, len(subscribed))
		for name := range subscribed {
			if _, ok := t.items[name]; ok {
				next[name] = t.hash(name)
			}
		}
	}
	return &deltaResponse{req: w.req, version: t.version, t: t, send: send, removed: removed, next: next}
}

// deltaResponse implements cache.DeltaResponse.
type deltaResponse struct {
	req     *cache.DeltaRequest
	version string
	t       snapType
	send    []string          // resources it carries
	removed []string          // resources the client must drop
	next    map[string]string // every resource the client has once it got this one
	out     *discoverygrpc.DeltaDiscoveryResponse
}

var _ cache.DeltaResponse = (*deltaResponse)(nil)

// GetDeltaDiscoveryResponse builds the response once (the stream server
// calls it once, then sets its nonce). Each resource is a wire
// resource's shared discovery Resource when it has one for this name and
// hash.
func (r *deltaResponse) GetDeltaDiscoveryResponse() (*discoverygrpc.DeltaDiscoveryResponse, error) {
	if r.out != nil {
		return r.out, nil
	}
	url := r.req.GetTypeUrl()
	res := make([]*discoverygrpc.Resource, len(r.send))
	for i, name := range r.send {
		item, hash := r.t.items[name].Resource, r.t.hash(name)
		if w, ok := item.(*wire); ok && w.delta.GetName() == name && w.delta.GetVersion() == hash && w.any.GetTypeUrl() == url {
			res[i] = w.delta
			continue
		}
		a, err := anyOf(item, url)
		if err != nil {
			return nil, err
		}
		res[i] = &discoverygrpc.Resource{Name: name, Version: hash, Resource: a}
	}
	r.out = &discoverygrpc.DeltaDiscoveryResponse{Resources: res, RemovedResources: r.removed, TypeUrl: url,
		SystemVersionInfo: r.version}
	return r.out, nil
}

func (r *deltaResponse) GetDeltaRequest() *discoverygrpc.DeltaDiscoveryRequest { return r.req }
func (r *deltaResponse) GetSystemVersion() (string, error)                     { return r.version, nil }
func (r *deltaResponse) GetResponseVersion() string                            { return r.version }
func (r *deltaResponse) GetNextVersionMap() map[string]string                  { return r.next }
func (r *deltaResponse) GetReturnedResources() map[string]string               { return r.next }
func (r *deltaResponse) GetContext() context.Context                           { return context.Background() }
