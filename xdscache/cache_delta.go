package xdscache

import (
	"context"
	"fmt"
	"slices"
	"strconv"

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
// holds for it. A wildcard stream given every resource of a type that has
// a version map is reported to hold one entry, versionKey, whose value is
// a tag recorded in sent (the node's, for w's kind; may be nil) with the
// version map it stands for, shared: no stream copies its type's version
// map. The tag is "version@epoch", epoch being the node's snapshot count.
func deltaAnswer(w *deltaWatch, snap *cache.Snapshot, sent *sentMaps, epoch uint64) *deltaResponse {
	t := typeIn(snap, w.kind, w.req.GetTypeUrl())
	has := w.has
	wildcard := w.sub.IsWildcard()
	subscribed := w.sub.SubscribedResources()
	whole := len(t.hashes) == len(t.items) // the version map names every item
	var send, removed []string
	switch {
	case wildcard && whole && has.shared:
		d := diffOf(has.m, t.hashes) // the same for the whole group (cache_memo.go)
		send, removed = d.changed, d.removed
	case wildcard && has.len() == 0:
		send = t.all() // shared: its resources are encoded once for every new stream
	case wildcard:
		send = t.changed(true, nil, has)
		for name := range has.m {
			if _, ok := t.items[name]; !ok {
				removed = append(removed, name)
			}
		}
		slices.Sort(removed)
	default:
		send = t.changed(false, subscribed, has)
		for name := range subscribed {
			if _, ok := t.items[name]; !ok {
				if _, had := has.get(name); had {
					removed = append(removed, name)
				}
			}
		}
		slices.Sort(removed)
	}
	if len(send) == 0 && len(removed) == 0 && !firstDelta(w) {
		return nil
	}
	var next map[string]string
	switch {
	case wildcard && whole && sent != nil:
		tag := t.version + "@" + strconv.FormatUint(epoch, 10)
		sent.add(tag, t.hashes)
		next = map[string]string{versionKey: tag}
	case wildcard:
		next = t.hashesOf(t.all())
	default:
		next = make(map[string]string, len(subscribed))
		for name := range subscribed {
			if _, ok := t.items[name]; ok {
				next[name] = t.hash(name)
			}
		}
	}
	return &deltaResponse{req: w.req, version: t.version, t: t, send: send, removed: removed, next: next}
}

// deltaHas resolves what the stream of a new delta watch has from its
// returned resources, when the watch opens (on the stream's goroutine,
// which alone changes the map): versionKey's tag stands for the version
// map recorded in sent. go-control-plane changes the map when a request
// unsubscribes names (before the watch opens): it marks a name to be sent
// again ("") or deletes it. Then the stream's own map (private: one per
// response) is made to hold every name, with those changes applied. An
// error when the tag is not known (more streams of the node than sent
// keeps): the stream ends, and its client resumes on a new one.
func deltaHas(req *cache.DeltaRequest, returned map[string]string, sent *sentMaps) (hasView, error) {
	tag, ok := returned[versionKey]
	if !ok {
		return hasView{m: returned}, nil
	}
	var m map[string]string
	if sent != nil {
		m, ok = sent.find(tag)
	}
	if !ok {
		return hasView{}, fmt.Errorf("xdscache: what the %s stream has (%q) is no longer known", req.GetTypeUrl(), tag)
	}
	unsub := req.GetResourceNamesUnsubscribe()
	if len(returned) == 1 && len(unsub) == 0 {
		return hasView{m: m, shared: true}, nil
	}
	delete(returned, versionKey)
	for _, name := range unsub {
		if _, marked := returned[name]; !marked {
			returned[name] = deleted
		}
	}
	for name, hash := range m {
		if _, set := returned[name]; !set {
			returned[name] = hash
		}
	}
	for name, v := range returned {
		if v == deleted {
			delete(returned, name)
		}
	}
	return hasView{m: returned}, nil
}

// deleted marks, in deltaHas, a name go-control-plane deleted from what a
// stream has. No hash is a NUL.
const deleted = "\x00"

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
// hash, in a slice shared by the responses that carry the same resources
// (cache_memo.go), so that the codec encodes them once for all of them.
func (r *deltaResponse) GetDeltaDiscoveryResponse() (*discoverygrpc.DeltaDiscoveryResponse, error) {
	if r.out != nil {
		return r.out, nil
	}
	url := r.req.GetTypeUrl()
	res, err := resourceSlices.of(r.send, r.t.items, url, func() ([]*discoverygrpc.Resource, error) {
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
		return res, nil
	})
	if err != nil {
		return nil, err
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
