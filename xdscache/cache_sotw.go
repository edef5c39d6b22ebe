package xdscache

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

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
}

// partial reports whether SotW responses of kind carry only what changed.
func partial(kind types.ResponseType) bool {
	return kind == types.Endpoint || kind == types.Route
}

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

// versionKey, in what a stream has (its returned resources), stands for
// every resource of the type at a version: what a wildcard subscription
// has after every response. Reported so, the stream holds a map of one
// entry, not a copy of the type's version map (the same for every node of
// a group); the version map itself is found in the node's current or
// previous snapshot (holding). Its value is "version@epoch", epoch being
// the node's snapshot count when the response was made. The server never
// adds to the map of a SotW stream; if it drops the key (a subscription
// turned named), the stream is taken to have nothing, and is sent what it
// asks for. No resource name starts with a NUL.
const versionKey = "\x00version"

// history is what a node's state knows of a type's past.
type history struct {
	prev   snapType // the type before its last change
	epoch  uint64   // the node's snapshot count
	lossAt uint64   // the count at the latest snapshot that dropped a resource of the type
}

// whole is what a stream that has every resource of t has, at epoch.
func (t snapType) whole(epoch uint64) map[string]string {
	if len(t.hashes) != len(t.items) {
		return t.hashesOf(t.all())
	}
	return map[string]string{versionKey: t.version + "@" + strconv.FormatUint(epoch, 10)}
}

// hasView is what a stream has (name -> content hash), as holding
// resolves it: a map, one entry of which (carrier) may carry the epoch of
// the response that reported it ("hash@epoch", see stamp).
type hasView struct {
	m       map[string]string
	carrier string // "" if none
	hash    string // the carrier's hash
	shared  bool   // m is a snapshot's version map (immutable, the same for a group)
}

func (h hasView) len() int { return len(h.m) }

func (h hasView) get(name string) (string, bool) {
	v, ok := h.m[name]
	if ok && name == h.carrier {
		return h.hash, true
	}
	return v, ok
}

func (h hasView) each(f func(name, hash string)) {
	for n, v := range h.m {
		if n == h.carrier {
			v = h.hash
		}
		f(n, v)
	}
}

// stamp records in next (named load assignments or route
// configurations) the epoch at which it is reported, on one entry: the
// server deletes no other entries from what a stream has than those it
// stops naming, so the epoch survives as long as that entry (see holding).
func stamp(next map[string]string, epoch uint64) {
	for n, v := range next {
		next[n] = v + "@" + strconv.FormatUint(epoch, 10)
		return
	}
}

// holding resolves what a stream has from its returned resources.
// versionKey stands for the version map of t or of h.prev. known is false
// when it stands for an older version, or, for load assignments and route
// configurations (dropsWithReferrer), when one of them left the snapshot
// since the stream's last response (the epoch stamped on it, see stamp,
// or in versionKey's value): a client drops a load assignment or route
// configuration when its cluster or listener goes, so a stream whose
// response was on its way then may lack one that came back since,
// unchanged, and must be sent all it asks for. A named stream that lost
// its stamp (it stopped naming that entry) is taken to be behind too.
func holding(returned map[string]string, t snapType, h history, dropsWithReferrer bool) (has hasView, known bool) {
	m, ok := returned[versionKey]
	if !ok {
		has = hasView{m: returned}
		if !dropsWithReferrer || len(returned) == 0 {
			return has, true
		}
		for n, v := range returned {
			if at := strings.LastIndexByte(v, '@'); at >= 0 {
				epoch, err := strconv.ParseUint(v[at+1:], 10, 64)
				has.carrier, has.hash = n, v[:at]
				return has, err == nil && epoch >= h.lossAt
			}
		}
		return has, h.lossAt == 0
	}
	at := strings.LastIndexByte(m, '@')
	epoch, err := strconv.ParseUint(m[at+1:], 10, 64)
	switch v := m[:max(at, 0)]; {
	case at < 0 || err != nil || dropsWithReferrer && epoch < h.lossAt:
		return hasView{}, false
	case v == t.version && len(t.hashes) == len(t.items):
		return hasView{m: t.hashes, shared: true}, true
	case v == h.prev.version && h.prev.hashes != nil:
		return hasView{m: h.prev.hashes, shared: true}, true
	}
	return hasView{}, false
}

// changed lists (sorted) the requested resources in t whose hash differs
// from has's, or that has lacks.
func (t snapType) changed(wildcard bool, subscribed map[string]struct{}, has hasView) []string {
	var out []string
	if wildcard {
		for name := range t.items {
			if v, ok := has.get(name); !ok || v != t.hash(name) {
				out = append(out, name)
			}
		}
	} else {
		for name := range subscribed {
			if _, ok := t.items[name]; !ok {
				continue
			}
			if v, ok := has.get(name); !ok || v != t.hash(name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// lost reports whether has holds a resource that t does not.
func (t snapType) lost(has hasView) bool {
	for name := range has.m {
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
		return nil, fmt.Errorf("xdscache: marshal %s: %w", cache.GetResourceName(res), err)
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

// all lists every resource name of the type, sorted (read only: it may
// be shared).
func (t snapType) all() []string {
	if len(t.hashes) == len(t.items) {
		return namesOf(t.hashes) // the version map names every item: kept per map
	}
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
