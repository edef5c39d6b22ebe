package xds

import (
	"sync"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"

	"github.com/xds-server/xds-server/xdscache"
)

// pushTimes keeps, per node and type, when a change the node has not been
// sent yet reached the reconciler, for the push latency metric
// (xds_push_latency_seconds). Per node, so that the responses and ACKs of
// 10,000 streams never wait on one lock.
type pushTimes struct {
	nodes sync.Map // node id -> *nodePushes
}

// given is what the reconciler gave a node: its latest snapshot and its
// push times' entry (found once, not per pass).
type given struct {
	snap *cache.Snapshot
	push *nodePushes
}

// pushed records the latency of a change reaching a node.
func (r *reconciler) pushed(id, typeURL string) {
	if t, ok := r.pushes.sent(id, typeURL, time.Now()); ok {
		r.latency.get(typeURL).Observe(r.now().Sub(t).Seconds())
	}
}

// nodePushes is one node's awaited changes.
type nodePushes struct {
	mu    sync.Mutex
	snap  *cache.Snapshot                 // the latest snapshot the node was given
	since [len(xdscache.Kinds)]time.Time  // per kind, when the oldest change not sent yet came; zero: none
	pass  [len(xdscache.Kinds)]*passTrace // per kind, the pass that made it due; nil: none traced
}

// node returns node id's entry, made if needed.
func (p *pushTimes) node(id string) *nodePushes {
	v, ok := p.nodes.Load(id)
	if !ok {
		v, _ = p.nodes.LoadOrStore(id, &nodePushes{})
	}
	return v.(*nodePushes)
}

// set records that node id was given snap (see nodePushes.set).
func (p *pushTimes) set(id string, old, snap *cache.Snapshot, changedAt time.Time, pass *passTrace) {
	p.node(id).set(old, snap, changedAt, pass)
}

// set records that the node was given snap, with the kinds whose version
// changed since old changed at changedAt (zero: not recorded, as for a
// node's first snapshot) by pass (nil: not traced). A kind already
// awaiting a push keeps its time and pass.
func (n *nodePushes) set(old, snap *cache.Snapshot, changedAt time.Time, pass *passTrace) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.snap = snap
	if changedAt.IsZero() || old == nil {
		return
	}
	for k, kind := range xdscache.Kinds {
		if old.Resources[kind].Version != snap.Resources[kind].Version && n.since[k].IsZero() {
			n.since[k] = changedAt
			if pass != nil {
				pass.await()
				n.pass[k] = pass
			}
		}
	}
}

// sent returns when the change a response of typeURL to node brings came,
// if one was awaited, and forgets it; the pass that made it due counts
// it written at.
func (p *pushTimes) sent(id, typeURL string, at time.Time) (time.Time, bool) {
	k := kindIndex(typeURL)
	v, ok := p.nodes.Load(id)
	if !ok || k < 0 {
		return time.Time{}, false
	}
	n := v.(*nodePushes)
	n.mu.Lock()
	defer n.mu.Unlock()
	t, pass := n.since[k], n.pass[k]
	n.since[k], n.pass[k] = time.Time{}, nil
	if pass != nil {
		pass.wrote(at)
	}
	return t, !t.IsZero()
}

// upToDate forgets the change awaited for typeURL when the node's stream
// already has what snap, the node's latest snapshot, holds for it: the
// change did not concern what the node subscribes to, so nothing is sent
// and nothing is to be measured.
func (p *pushTimes) upToDate(id, typeURL string, snap *cache.Snapshot) {
	k := kindIndex(typeURL)
	v, ok := p.nodes.Load(id)
	if !ok || k < 0 {
		return
	}
	n := v.(*nodePushes)
	n.mu.Lock()
	if n.snap == snap {
		n.since[k] = time.Time{}
		if pass := n.pass[k]; pass != nil {
			n.pass[k] = nil
			pass.settle()
		}
	}
	n.mu.Unlock()
}

// forget drops a node; the passes it was due a response of stop waiting for it.
func (p *pushTimes) forget(id string) {
	v, ok := p.nodes.LoadAndDelete(id)
	if !ok {
		return
	}
	n := v.(*nodePushes)
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, pass := range n.pass {
		if pass != nil {
			n.pass[k] = nil
			pass.settle()
		}
	}
}

// kindURLs are the type URLs of xdscache.Kinds, in their order.
var kindURLs = func() (urls [len(xdscache.Kinds)]string) {
	for k, kind := range xdscache.Kinds {
		urls[k], _ = cache.GetResponseTypeURL(kind)
	}
	return urls
}()

// kindIndex is the position of typeURL in kinds, or -1.
func kindIndex(typeURL string) int {
	for k, url := range kindURLs {
		if url == typeURL {
			return k
		}
	}
	return -1
}

// perKind is a labelled metric's child for each of xdscache.Kinds, looked
// up once: WithLabelValues hashes its labels and takes the vector's lock
// on every call, and every response of every node counts.
type perKind[M any] struct {
	kinds [len(xdscache.Kinds)]M
	of    func(typeName string) M // any other type's, per call
}

func newPerKind[M any](of func(typeName string) M) *perKind[M] {
	p := &perKind[M]{of: of}
	for k, url := range kindURLs {
		p.kinds[k] = of(xdscache.TypeName(url))
	}
	return p
}

// get is typeURL's child.
func (p *perKind[M]) get(typeURL string) M {
	if k := kindIndex(typeURL); k >= 0 {
		return p.kinds[k]
	}
	return p.of(xdscache.TypeName(typeURL))
}
