package xdscache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
)

// Cache is the cache go-control-plane's stream servers answer from
// (its cache.Cache interface): each node's snapshot, as the reconciler
// last set it, and the open watches of the node's streams.
//
// A watch is answered from the node's snapshot as soon as the snapshot
// holds something its stream does not have (cache_sotw.go,
// cache_delta.go): at once when it is opened, else when a snapshot is
// set. Responses carry the resources pre-encoded once for the whole fleet
// (wire.go) and their precomputed content hashes (the snapshot's version
// map): nothing is encoded or hashed per node.
//
// Envoy nodes (user agent "envoy") get xDS's ADS semantics: responses go
// out in type order (clusters before endpoints, listeners before routes),
// and a named request is answered only once it names every resource of
// the type in the snapshot, which Envoy does (its snapshot holds exactly
// the routes of its listeners and the load assignments of its clusters).
// grpc-go names only what its channels use (one listener, its route, the
// clusters of that route), so for the other nodes a named request is
// answered with the named resources there are.
//
// Nothing here is cache-wide on the hot paths: each node has its own
// state and lock, found in a sync.Map, so setting 10,000 snapshots and
// opening watches from 10,000 streams do not wait for each other. A
// node's state points into the shared, immutable snapshot; it copies
// nothing of it.
//
// go-control-plane's heartbeats are not used: our resources have no TTL,
// and responses carry them bare.
type Cache struct {
	// fullState makes every SotW response carry every requested
	// resource (xds.sotw_full_state), as go-control-plane's cache did.
	fullState bool
	nodes     sync.Map // node id -> *nodeState
	// UpToDate, if set, is called (under the node's lock: it must be
	// quick) when a watch of typeURL finds nothing to send: the node has
	// what snap holds for its subscription.
	UpToDate func(node, typeURL string, snap *cache.Snapshot)
	// Subscribed, if set, may refuse a delta watch whose stream subscribes
	// to n names of typeURL (xds.max_resource_names, names.go).
	Subscribed func(node, typeURL string, n int) error
	loss       atomic.Pointer[lossMemo] // the last lost answer
}

var _ cache.Cache = (*Cache)(nil)

func New(fullState bool) *Cache {
	return &Cache{fullState: fullState}
}

// lock returns the state of node id, locked, making it if needed.
func (c *Cache) lock(id string) *nodeState {
	for {
		v, ok := c.nodes.Load(id)
		if !ok {
			v, _ = c.nodes.LoadOrStore(id, &nodeState{})
		}
		st := v.(*nodeState)
		st.mu.Lock()
		if !st.gone {
			return st
		}
		st.mu.Unlock() // cleared meanwhile: its successor is (or will be) in nodes
	}
}

// CreateWatch implements cache.ConfigWatcher: it answers at once if the
// node's snapshot holds something the stream lacks, else it keeps the
// watch until a snapshot does.
func (c *Cache) CreateWatch(req *cache.Request, sub cache.Subscription, out chan cache.Response) (func(), error) {
	w := &sotwWatch{req: req, sub: sub, out: out, kind: cache.GetResponseType(req.GetTypeUrl()),
		ads: IsEnvoyAgent(req.GetNode().GetUserAgentName())}
	id := req.GetNode().GetId()
	st := c.lock(id)
	defer st.mu.Unlock()
	st.noteRequest(w.kind, req.GetResponseNonce(), req.GetErrorDetail() != nil)
	st.noteResume(w.kind, req)
	if ref := referrerOf(w.kind); ref >= 0 {
		w.referrerStale = st.stale[ref]
	}
	if st.snap != nil && c.answerSotW(id, w, st) {
		return func() {}, nil
	}
	st.sotw = insertByKind(st.sotw, w, func(w *sotwWatch) types.ResponseType { return w.kind })
	if st.held && !routing(w.kind) {
		c.releaseRouting(id, st) // cache_order.go
	}
	return func() {
		st.mu.Lock()
		st.sotw = slices.DeleteFunc(st.sotw, func(o *sotwWatch) bool { return o == w })
		if st.held && !routing(w.kind) {
			c.releaseRouting(id, st) // a stream went: what waited on it may go (cache_order.go)
		}
		st.mu.Unlock()
	}, nil
}

// CreateDeltaWatch implements cache.ConfigWatcher, as CreateWatch.
func (c *Cache) CreateDeltaWatch(req *cache.DeltaRequest, sub cache.Subscription, out chan cache.DeltaResponse) (func(), error) {
	w := &deltaWatch{req: req, sub: sub, out: out, kind: cache.GetResponseType(req.GetTypeUrl())}
	id := req.GetNode().GetId()
	if c.Subscribed != nil {
		if err := c.Subscribed(id, req.GetTypeUrl(), len(sub.SubscribedResources())); err != nil {
			return nil, err
		}
	}
	st := c.lock(id)
	defer st.mu.Unlock()
	var err error
	if w.has, err = deltaHas(req, sub.ReturnedResources(), st.sentOf(w.kind)); err != nil {
		return nil, err
	}
	st.noteRequest(w.kind, req.GetResponseNonce(), req.GetErrorDetail() != nil)
	if st.snap != nil && c.answerDelta(id, w, st) {
		return func() {}, nil
	}
	st.delta = insertByKind(st.delta, w, func(w *deltaWatch) types.ResponseType { return w.kind })
	if st.held && !routing(w.kind) {
		c.releaseRouting(id, st) // cache_order.go
	}
	return func() {
		st.mu.Lock()
		st.delta = slices.DeleteFunc(st.delta, func(o *deltaWatch) bool { return o == w })
		if st.held && !routing(w.kind) {
			c.releaseRouting(id, st) // a stream went: what waited on it may go (cache_order.go)
		}
		st.mu.Unlock()
	}, nil
}

// insertByKind inserts w after the watches of its kind or earlier kinds.
func insertByKind[W any](ws []W, w W, kind func(W) types.ResponseType) []W {
	i := len(ws)
	for i > 0 && kind(ws[i-1]) > kind(w) {
		i--
	}
	return slices.Insert(ws, i, w)
}

// answerSotW sends w its answer from the node's snapshot, if it has one,
// and reports whether it did (the watch is then done).
func (c *Cache) answerSotW(id string, w *sotwWatch, st *nodeState) bool {
	resp, upToDate := sotwAnswer(w, st.snap, st.history(w.kind), c.fullState)
	if resp == nil {
		if upToDate {
			w.idle = versionOf(st.snap, w.kind)
			if c.UpToDate != nil {
				c.UpToDate(id, w.req.GetTypeUrl(), st.snap)
			}
		}
		return false
	}
	if w.ads && routing(w.kind) && len(resp.names) > 0 && !clustersInPlace(st, c.fullState) {
		st.held = true // cache_order.go
		return false
	}
	if !offer(w.out, cache.Response(resp)) {
		return false
	}
	if w.kind == types.Cluster || w.kind == types.Listener {
		st.stale[w.kind] = true // what the node's types that refer to them have may lag (resume.go)
	}
	return true
}

// answerDelta is answerSotW for a delta watch.
func (c *Cache) answerDelta(id string, w *deltaWatch, st *nodeState) bool {
	resp := deltaAnswer(w, st.snap, st.sentOf(w.kind), st.epoch)
	if resp == nil {
		w.idle = versionOf(st.snap, w.kind)
		if c.UpToDate != nil {
			c.UpToDate(id, w.req.GetTypeUrl(), st.snap)
		}
		return false
	}
	if routing(w.kind) && len(resp.send) > 0 && isEnvoyDelta(w) && !clustersInPlace(st, c.fullState) {
		st.held = true // cache_order.go
		return false
	}
	return offer(w.out, cache.DeltaResponse(resp))
}

// offer sends an answer on a watch's channel if it has room, and reports
// whether it did. go-control-plane's ADS streams share one channel among
// their watches, with room for one answer of each of its known types
// (twice that for delta); a watch is answered once and a stream has one
// per type URL, but type URLs it does not know are as many as a client
// names, and a send on a full channel would block the stream's own
// goroutine (which drains it) inside CreateWatch, under the node's lock.
// A watch not answered stays open: the next snapshot answers it.
func offer[R any](out chan R, r R) bool {
	select {
	case out <- r:
		return true
	default:
		return false
	}
}

// SetSnapshot gives node its snapshot and answers its open watches that
// it gives something new, in type order. A watch that had nothing to
// send is not looked at again while its type keeps its version (skips).
func (c *Cache) SetSnapshot(id string, snap *cache.Snapshot) error {
	if snap == nil {
		return errors.New("xdscache: nil snapshot")
	}
	st := c.lock(id)
	defer st.mu.Unlock()
	st.epoch++
	if old := st.snap; old != nil {
		lost := c.lost(old, snap)
		for _, kind := range Kinds {
			if url, _ := cache.GetResponseTypeURL(kind); old.Resources[kind].Version != snap.Resources[kind].Version {
				st.past[kind].prev = snapType{hashes: old.VersionMap[url], version: old.Resources[kind].Version}
			}
			if lost[kind] {
				st.past[kind].lossAt = st.epoch
			}
		}
	}
	st.snap = snap
	keep := st.sotw[:0]
	for _, w := range st.sotw {
		if skips(w.idle, snap, w.kind) || !c.answerSotW(id, w, st) {
			keep = append(keep, w)
		}
	}
	clear(st.sotw[len(keep):])
	st.sotw = keep
	keepD := st.delta[:0]
	for _, w := range st.delta {
		if skips(w.idle, snap, w.kind) || !c.answerDelta(id, w, st) {
			keepD = append(keepD, w)
		}
	}
	clear(st.delta[len(keepD):])
	st.delta = keepD
	return nil
}

// lossMemo is which kinds lose a resource from old to new.
type lossMemo struct {
	old, new *cache.Snapshot
	lost     [len(Kinds)]bool
}

// lost reports, per kind, whether a resource of old is not in new. The
// nodes of a group move between the same two snapshots one after the
// other: the last answer is kept.
func (c *Cache) lost(old, new *cache.Snapshot) [len(Kinds)]bool {
	if m := c.loss.Load(); m != nil && m.old == old && m.new == new {
		return m.lost
	}
	m := &lossMemo{old: old, new: new}
	for _, kind := range Kinds {
		if old.Resources[kind].Version == new.Resources[kind].Version {
			continue
		}
		items := new.Resources[kind].Items
		for name := range old.Resources[kind].Items {
			if _, ok := items[name]; !ok {
				m.lost[kind] = true
				break
			}
		}
	}
	c.loss.Store(m)
	return m.lost
}

// Clear drops a node's snapshot, and the node with it unless a stream of
// it still watches (its watches are then answered by the next snapshot).
func (c *Cache) Clear(id string) {
	v, ok := c.nodes.Load(id)
	if !ok {
		return
	}
	st := v.(*nodeState)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.snap = nil
	if len(st.sotw) == 0 && len(st.delta) == 0 && !st.gone {
		st.gone = true
		c.nodes.CompareAndDelete(id, st)
	}
}

// Current returns a node's Current, nil if it has none.
func (c *Cache) Current(id string) *cache.Snapshot {
	v, ok := c.nodes.Load(id)
	if !ok {
		return nil
	}
	st := v.(*nodeState)
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.snap
}

// GetSnapshot returns a node's snapshot.
func (c *Cache) GetSnapshot(id string) (cache.ResourceSnapshot, error) {
	if v, ok := c.nodes.Load(id); ok {
		st := v.(*nodeState)
		st.mu.Lock()
		snap := st.snap
		st.mu.Unlock()
		if snap != nil {
			return snap, nil
		}
	}
	return nil, fmt.Errorf("xdscache: no snapshot for node %q", id)
}

// Fetch implements cache.ConfigFetcher (REST-like unary requests): every
// requested resource there is, unless the request has the version.
func (c *Cache) Fetch(_ context.Context, req *cache.Request) (cache.Response, error) {
	snap, err := c.GetSnapshot(req.GetNode().GetId())
	if err != nil {
		return nil, err
	}
	s := snap.(*cache.Snapshot)
	kind := cache.GetResponseType(req.GetTypeUrl())
	t := typeIn(s, kind, req.GetTypeUrl())
	if req.GetVersionInfo() == t.version {
		return nil, &types.SkipFetchError{}
	}
	var names []string
	if len(req.GetResourceNames()) == 0 {
		names = t.all()
	} else {
		for _, n := range req.GetResourceNames() {
			if _, ok := t.items[n]; ok {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		names = slices.Compact(names)
	}
	return t.sotwResponse(req, names, nil), nil
}

// releaseRouting answers the node's listener and route watches that were
// held (see above) and can go now; called when a cluster or load
// assignment watch of a node with a held answer opened with nothing to send.
func (c *Cache) releaseRouting(id string, st *nodeState) {
	if st.snap == nil {
		return
	}
	st.held = false // set again by what stays held
	keep := st.sotw[:0]
	for _, w := range st.sotw {
		if !(routing(w.kind) && w.ads && c.answerSotW(id, w, st)) {
			keep = append(keep, w)
		}
	}
	clear(st.sotw[len(keep):])
	st.sotw = keep
	keepD := st.delta[:0]
	for _, w := range st.delta {
		if !(routing(w.kind) && isEnvoyDelta(w) && c.answerDelta(id, w, st)) {
			keepD = append(keepD, w)
		}
	}
	clear(st.delta[len(keepD):])
	st.delta = keepD
}
