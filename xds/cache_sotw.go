package xds

import (
	"context"
	"fmt"
	"maps"
	"slices"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
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
// from what the stream was last sent (or that it has not been sent), and
// none is sent when nothing differs: a change of one service sends one
// load assignment, not all of them. Clusters and listeners (and any other
// type) are full state: every requested resource, whenever the version
// differs from the request's. With nodeCache.fullState every type is.
//
// What a stream has is go-control-plane's subscription state: the
// server records the map a response reports (GetReturnedResources) when
// it sends it, so a response reports every resource the client then has
// (name -> content hash), not only those it carries.
//
// Deletions: a client drops a load assignment or route configuration
// when the cluster or listener that refers to it goes (Envoy and grpc-go
// then stop naming it). A wildcard subscription cannot stop naming
// anything, so when one of its resources leaves the snapshot, the
// response carries the full state of the type (which tells a client that
// reads it as full state, and resets what the stream has).

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
}

// partial reports whether SotW responses of kind carry only what changed.
func partial(kind types.ResponseType) bool {
	return kind == types.Endpoint || kind == types.Route
}

// sotwAnswer is w's answer from snap: nil when there is none yet, with
// upToDate when that is because the stream has what snap holds for it.
func sotwAnswer(w *sotwWatch, snap *cache.Snapshot, fullState bool) (resp *sotwResponse, upToDate bool) {
	t := typeIn(snap, w.kind, w.req.GetTypeUrl())
	wildcard := w.sub.IsWildcard()
	subscribed := w.sub.SubscribedResources()
	if w.ads && !wildcard {
		for name := range t.items {
			if _, ok := subscribed[name]; !ok {
				return nil, false // ADS: wait for a request naming every resource
			}
		}
	}
	has := w.sub.ReturnedResources()
	if len(has) == 0 {
		if w.resumed == nil {
			w.resumed = resumedSotW(w, t)
		}
		if w.resumed != nil {
			has = w.resumed
		}
	}
	reqVersion := w.req.GetVersionInfo()
	nack := w.req.GetErrorDetail() != nil && reqVersion != t.version
	if fullState || !partial(w.kind) || nack {
		// Full state (and the answer to a NACK, as go-control-plane's
		// cache gives it): everything requested, when the version differs
		// or a requested resource was never sent.
		if reqVersion == t.version && !missing(t, wildcard, subscribed, has) {
			return nil, true
		}
		names := t.requested(wildcard, subscribed)
		return t.sotwResponse(w.req, names, t.hashesOf(names)), false
	}
	changed := t.changed(wildcard, subscribed, has)
	switch {
	case wildcard && t.lost(has):
		// A resource left the snapshot: full state (see above).
		names := t.all()
		return t.sotwResponse(w.req, names, t.hashesOf(names)), false
	case len(changed) > 0:
		next := make(map[string]string, len(has)+len(changed))
		maps.Copy(next, has)
		for _, n := range changed {
			next[n] = t.hash(n)
		}
		return t.sotwResponse(w.req, changed, next), false
	case wildcard && len(t.items) == 0 && len(has) == 0 && reqVersion != t.version:
		// The first answer of an empty type: a wildcard subscriber learns
		// there is nothing (as it always did).
		return t.sotwResponse(w.req, nil, map[string]string{}), false
	}
	return nil, true
}

// missing reports whether a requested resource in t was never sent.
func missing(t snapType, wildcard bool, subscribed map[string]struct{}, has map[string]string) bool {
	if wildcard {
		for name := range t.items {
			if _, ok := has[name]; !ok {
				return true
			}
		}
		return false
	}
	for name := range subscribed {
		if _, ok := has[name]; !ok {
			if _, ok := t.items[name]; ok {
				return true
			}
		}
	}
	return false
}

// changed lists (sorted) the requested resources in t whose hash differs
// from has's, or that has lacks.
func (t snapType) changed(wildcard bool, subscribed map[string]struct{}, has map[string]string) []string {
	var out []string
	if wildcard {
		for name := range t.items {
			if v, ok := has[name]; !ok || v != t.hash(name) {
				out = append(out, name)
			}
		}
	} else {
		for name := range subscribed {
			if _, ok := t.items[name]; !ok {
				continue
			}
			if v, ok := has[name]; !ok || v != t.hash(name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// lost reports whether has holds a resource that t does not.
func (t snapType) lost(has map[string]string) bool {
	for name := range has {
		if _, ok := t.items[name]; !ok {
			return true
		}
	}
	return false
}

// requested lists (sorted) the requested resources in t.
func (t snapType) requested(wildcard bool, subscribed map[string]struct{}) []string {
	if wildcard {
		return t.all()
	}
	out := make([]string, 0, len(subscribed))
	for name := range subscribed {
		if _, ok := t.items[name]; ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// sotwResponse implements cache.Response.
type sotwResponse struct {
	req      *cache.Request
	version  string
	items    []types.Resource
	returned map[string]string // every resource the client has once it got this one
	out      *discoverygrpc.DiscoveryResponse
}

var _ cache.Response = (*sotwResponse)(nil)

func (t snapType) sotwResponse(req *cache.Request, names []string, returned map[string]string) *sotwResponse {
	items := make([]types.Resource, len(names))
	for i, n := range names {
		items[i] = t.items[n].Resource
	}
	return &sotwResponse{req: req, version: t.version, items: items, returned: returned}
}

// GetDiscoveryResponse builds the response once (the stream server calls
// it once, then sets its nonce).
func (r *sotwResponse) GetDiscoveryResponse() (*discoverygrpc.DiscoveryResponse, error) {
	if r.out != nil {
		return r.out, nil
	}
	url := r.req.GetTypeUrl()
	anys := make([]*anypb.Any, len(r.items))
	for i, res := range r.items {
		a, err := anyOf(res, url)
		if err != nil {
			return nil, err
		}
		anys[i] = a
	}
	r.out = &discoverygrpc.DiscoveryResponse{VersionInfo: r.version, Resources: anys, TypeUrl: url}
	return r.out, nil
}

func (r *sotwResponse) GetRequest() *discoverygrpc.DiscoveryRequest { return r.req }
func (r *sotwResponse) GetVersion() (string, error)                 { return r.version, nil }
func (r *sotwResponse) GetResponseVersion() string                  { return r.version }
func (r *sotwResponse) GetReturnedResources() map[string]string     { return r.returned }
func (r *sotwResponse) GetContext() context.Context                 { return context.Background() }

// anyOf is res as a response carries it: a wire resource's shared Any,
// else a new one.
func anyOf(res types.Resource, url string) (*anypb.Any, error) {
	if w, ok := res.(*wire); ok && w.any.GetTypeUrl() == url {
		return w.any, nil
	}
	b, err := cache.MarshalResource(res)
	if err != nil {
		return nil, fmt.Errorf("xds: marshal %s: %w", cache.GetResourceName(res), err)
	}
	return &anypb.Any{TypeUrl: url, Value: b}, nil
}

// snapType is one type of a snapshot.
type snapType struct {
	items   map[string]types.ResourceWithTTL
	hashes  map[string]string // resource name -> content hash (the snapshot's version map)
	version string
}

func typeIn(s *cache.Snapshot, kind types.ResponseType, url string) snapType {
	if s == nil || kind < 0 || kind >= types.UnknownType {
		return snapType{}
	}
	return snapType{items: s.Resources[kind].Items, hashes: s.VersionMap[url], version: s.Resources[kind].Version}
}

// hash is a resource's content hash (the type's version if the snapshot
// has no version map, which ours always have).
func (t snapType) hash(name string) string {
	if v, ok := t.hashes[name]; ok {
		return v
	}
	return t.version
}

// all lists every resource name of the type, sorted.
func (t snapType) all() []string {
	return slices.Sorted(maps.Keys(t.items))
}

// hashesOf maps names to their hashes.
func (t snapType) hashesOf(names []string) map[string]string {
	if len(names) == len(t.items) && len(t.hashes) == len(t.items) {
		return maps.Clone(t.hashes) // all of them
	}
	out := make(map[string]string, len(names))
	for _, n := range names {
		out[n] = t.hash(n)
	}
	return out
}
