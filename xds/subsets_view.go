package xds

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/subsetting"
	"github.com/xds-server/xds-server/translate"
)

// SubsetsView is the node subsets as of one reconcile pass (or one change
// of the known nodes since): which serving endpoints each node is given
// of each service. It is immutable: the reconciler publishes a new view
// (Config.OnSubsets) rather than changing one, and every answer is taken
// from what the view captured. A service's answer is computed on first
// use and kept, so a consumer reading a few services of a large fleet
// pays only for those. Safe for concurrent use.
type SubsetsView struct {
	version  uint64
	nodes    []viewNode              // known nodes at capture, sorted by id
	services map[string]*viewService // shared by the views of one pass

	mu   sync.Mutex
	done map[string]map[string][]string // service -> node -> ids, as computed
}

// viewNode is a known node's place for subsetting.
type viewNode struct {
	id    string
	index int             // client index; < 0 until set
	place translate.Place // for services with a locality policy
}

// viewService is what a view needs of one service's translation; nothing
// in it changes after the translation that built it but the cache of
// picks, which the views of that translation share (a view after a node
// connected computes only the new node's pick), and so do the next
// translations while the plan and its endpoints' serving states stay (a
// weights change retranslates a service, not its subsets).
type viewService struct {
	all     []string        // without subsets: the serving endpoint ids, sorted
	plan    subsetting.Plan // nil: every node gets all
	ids     []string        // endpoint ids in plan order
	serving []bool          // by plan index
	picks   *pickCache
	local   *localView // a service with a locality policy; then the fields above are unused
}

// pickCache holds the serving ids of client indices, as computed.
type pickCache struct {
	mu      sync.Mutex
	byIndex map[int][]string
}

// Version numbers the views one server published, from 1, increasing.
func (v *SubsetsView) Version() uint64 { return v.version }

// NodeSubsets returns, for every known node, the ids of the serving
// endpoints of service it is given (sorted): its subset and replacements,
// or every serving endpoint of a service without subsets. Nodes without a
// client index are left out of a subset service; nil if the service is
// unknown. The result is shared: callers must not modify it.
func (v *SubsetsView) NodeSubsets(service string) map[string][]string {
	if v == nil {
		return nil
	}
	s, ok := v.services[service]
	if !ok {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if out, ok := v.done[service]; ok {
		return out
	}
	out := s.nodeSubsets(v.nodes)
	if v.done == nil {
		v.done = map[string]map[string][]string{}
	}
	v.done[service] = out
	return out
}

// nodeSubsets computes the service's subsets of nodes.
func (s *viewService) nodeSubsets(nodes []viewNode) map[string][]string {
	if s.local != nil {
		return s.local.nodeSubsets(nodes)
	}
	out := make(map[string][]string, len(nodes))
	if s.plan == nil {
		for _, n := range nodes {
			out[n.id] = s.all
		}
		return out
	}
	c := s.picks
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range nodes {
		if n.index < 0 {
			continue
		}
		ids, ok := c.byIndex[n.index] // nodes of several groups share an index
		if !ok {
			ids = s.servingOf(translate.Pick(s.plan, s.serving, n.index))
			c.byIndex[n.index] = ids
		}
		out[n.id] = ids
	}
	return out
}

// servingOf returns the ids of the serving endpoints among the plan
// indices order, sorted.
func (s *viewService) servingOf(order []int) []string {
	var ids []string
	for _, i := range order {
		if s.serving[i] {
			ids = append(ids, s.ids[i])
		}
	}
	slices.Sort(ids)
	return ids
}

// newViewService captures a translated service for views (its plan, nil
// without subsetting, and its translation input); prev is the
// service's previous capture (nil if none), whose picks are kept if they
// still hold.
func newViewService(sp *servicePlan, in envoy.Service, prev *viewService) *viewService {
	if sp == nil {
		return &viewService{all: servingIDs(in.Endpoints)}
	}
	ids := make([]string, len(sp.svc.Endpoints))
	for i, ep := range sp.svc.Endpoints {
		ids[i] = ep.ID
	}
	v := &viewService{plan: sp.plan, ids: ids, serving: sp.serving}
	if prev != nil && prev.plan == v.plan && slices.Equal(prev.ids, ids) && slices.Equal(prev.serving, v.serving) {
		v.picks = prev.picks
	} else {
		v.picks = &pickCache{byIndex: map[int][]string{}}
	}
	return v
}

// servingIDs returns the ids of the serving endpoints among eps, sorted.
func servingIDs(eps []envoy.Endpoint) []string {
	var ids []string
	for _, ep := range eps {
		if serving(ep.Health) {
			ids = append(ids, ep.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// subsetViews is the reconciler's part that publishes SubsetsViews: one
// after each pass, and one after known nodes changed (a node connected or
// was forgotten), at most one per debounce. Its fields are guarded by the
// reconciler's mu.
type subsetViews struct {
	publish func(*SubsetsView) // Config.OnSubsets; nil: views are only kept
	version uint64
	latest  atomic.Pointer[SubsetsView]
	pending *time.Timer // a publication after node changes is due
}

// next publishes the next view of svcs over nodes. Called under the
// reconciler's lock: views are published in version order.
func (vs *subsetViews) next(svcs map[string]*viewService, nodes []viewNode) {
	vs.version++
	v := &SubsetsView{version: vs.version, nodes: nodes, services: svcs}
	vs.latest.Store(v)
	if vs.publish != nil {
		vs.publish(v)
	}
}

// nodesChanged schedules, after debounce, a view of the last view's
// services over the nodes known then (nodes, called under mu, the
// reconciler's lock, which is held when nodesChanged is called).
func (vs *subsetViews) nodesChanged(debounce time.Duration, mu sync.Locker, nodes func() []viewNode) {
	if vs.pending != nil || vs.latest.Load() == nil {
		return
	}
	vs.pending = time.AfterFunc(debounce, func() {
		mu.Lock()
		defer mu.Unlock()
		vs.pending = nil
		vs.next(vs.latest.Load().services, nodes())
	})
}

// viewNodes lists the known nodes' places, sorted by id; place, when not
// nil (some service has a locality policy), gives a node's locality place.
func viewNodes(reg *registry, place func(Node) translate.Place) []viewNode {
	nodes := reg.all() // one lock for the fleet, not one per node
	out := make([]viewNode, 0, len(nodes))
	for _, node := range nodes {
		vn := viewNode{id: node.ID, index: node.Index}
		if place != nil {
			vn.place = place(node)
		}
		out = append(out, vn)
	}
	return out
}
