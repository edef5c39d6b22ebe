package xds

import (
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/policy"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/xdscache"
)

// reconciler turns discovery snapshots into per-node cache snapshots.
// Update and kick may be called from any goroutine; rebuilds happen on the
// loop goroutine, debounced.
type reconciler struct {
	cache    *xdscache.Cache
	reg      *registry
	m        *metrics
	latency  *perKind[prometheus.Observer] // m.pushLatency's children
	log      *slog.Logger
	settings translate.SettingsFunc
	lis      *listenerSet // configured listeners; nil when there are none
	now      func() time.Time
	debounce time.Duration
	maxDelay time.Duration

	kick chan struct{} // buffered(1): "something changed"

	inMu      sync.Mutex
	input     *discovery.Snapshot          // latest unprocessed discovery snapshot
	last      *discovery.Snapshot          // latest processed one, redone when weights change
	changedAt time.Time                    // when the oldest unprocessed change arrived
	weights   map[string]map[string]uint32 // service -> endpoint id -> EDS weight
	nodeW     NodeWeights                  // per-node weights
	spill     Spill                        // zone spill states
	spillVer  uint64                       // incremented by every SetSpill
	pols      map[string]policy.Policy     // traffic policies (SetPolicies)

	mu       sync.Mutex                 // guards the fields below
	memo     map[string]memoEntry       // service name -> translation
	shared   map[string]*cache.Snapshot // assembly key -> snapshot
	sub      *subsets                   // per-node variants of the shared snapshots
	slots    *endpointSlots             // stable slots of steady-subset endpoints
	nodeSnap map[string]given           // node id -> what it was last given
	ready    bool                       // a first snapshot has been built

	routes *routeCheck // the services listeners route to

	policyErrs map[string]string    // services whose policy is not served -> why (logged once per change)
	aggs       []xdscache.Item      // the policies' aggregate clusters (retry_other_split), sorted by name
	served     *listenerSet         // lis with the policies' routes (withPolicies); nil before the first pass
	linger     lingerState          // policy clusters kept a while after their policy dropped them
	hold       holdState            // split targets' serving changes, held on one side (policyHold)
	lastExp    *translate.Expansion // the latest pass's (its subset picks are reused)
	routeMemo  map[string]routeMemo // policy route items by service, from the latest pass
	routeNext  map[string]routeMemo // the same, being filled by this pass

	afterReconcile func() // test hook, called after each reconcile pass

	pushes pushTimes // changes awaiting their push, for the latency metric

	traces passTraces // the stages of each pass (stages.go)

	views subsetViews // the node subsets published after each pass
}

// reconcileConfig is what the reconcile loop takes of the server's
// Config (see there).
type reconcileConfig struct {
	Settings    translate.SettingsFunc
	Logger      *slog.Logger
	Now         func() time.Time
	Debounce    time.Duration
	MaxDelay    time.Duration
	OnSubsets   func(*SubsetsView)
	Datacenters []string
	Passes      PassObserver
}

func newReconciler(c *xdscache.Cache, reg *registry, m *metrics, cfg reconcileConfig, lis *listenerSet) *reconciler {
	r := &reconciler{
		cache: c, reg: reg, m: m, log: cfg.Logger, settings: cfg.Settings, lis: lis, now: cfg.Now,
		debounce: cfg.Debounce, maxDelay: cfg.MaxDelay,
		kick:     make(chan struct{}, 1),
		memo:     map[string]memoEntry{},
		shared:   map[string]*cache.Snapshot{},
		sub:      newSubsets(m, cfg.Logger),
		nodeSnap: map[string]given{},
		routes:   &routeCheck{lis: lis, m: m, log: cfg.Logger},
		views:    subsetViews{publish: cfg.OnSubsets},
	}
	r.served = lis
	r.latency = newPerKind(func(name string) prometheus.Observer { return m.pushLatency.WithLabelValues(name) })
	r.traces.hist, r.traces.obs = m.stages, cfg.Passes
	r.linger.after = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
	c.UpToDate = r.pushes.upToDate
	r.sub.keyOf = lis.assemblyKey
	r.sub.build = func(key string) (*cache.Snapshot, error) { return r.base(key, r.sub.items) }
	if len(cfg.Datacenters) > 0 {
		r.sub.local.defaultDC, r.sub.local.datacenters = cfg.Datacenters[0], slices.Clone(cfg.Datacenters)
	}
	return r
}

// reconcile applies the latest discovery snapshot to every node.
func (r *reconciler) reconcile() {
	r.inMu.Lock()
	in, changedAt, weights, nodeW, pols := r.input, r.changedAt, r.weights, r.nodeW, r.pols
	spill, spillVer := r.spill, r.spillVer
	if in == nil { // a kick whose change an earlier pass already took
		r.inMu.Unlock()
		return
	}
	r.input, r.last = nil, in
	r.inMu.Unlock()
	start := time.Now()
	pass := r.traces.start(start)
	r.mu.Lock()
	defer r.mu.Unlock()
	exp := r.expand(r.lis.withRouted(*in), pols) // a routed service has a cluster, instances or not
	items := r.translateAll(exp, weights)
	nodes := r.reg.all() // one lock for the fleet, not one per node
	shared, err := r.bases(items, nodes)
	r.traces.translated(pass, time.Now())
	if err != nil {
		r.m.buildErrors.Inc()
		r.log.Error("snapshot rejected; nodes keep their previous config", "error", err)
		r.traces.seal(pass, time.Now(), 0)
		return
	}
	r.ready = true
	r.shared = shared
	r.sub.local.spill, r.sub.local.spillVer = spill, spillVer
	r.sub.rebase(items, r.plans(items), r.shared, nodeW, r.inputs(nodeW), r.locals(items))
	set := 0
	for _, node := range nodes {
		if r.setLocked(node, changedAt, pass) {
			set++
		}
	}
	r.traces.seal(pass, time.Now(), set)
	r.sub.settle()
	r.publishSubsetsLocked()
	r.recordEndpoints(*in)
	r.routes.check(*in)
	r.m.reconciles.Inc()
	r.m.reconcileDur.Observe(time.Since(start).Seconds())
	if r.afterReconcile != nil {
		r.afterReconcile()
	}
}

// bases builds the shared snapshot of every assembly key a registered
// node has, and of the plain Envoy and proxyless keys. A node connecting
// later with another key gets its base built then (see subsets.build).
// nodes are the registered nodes (registry.all).
func (r *reconciler) bases(items []xdscache.ServiceItems, nodes []Node) (map[string]*cache.Snapshot, error) {
	keys := map[string]bool{keyProxyless: true, keyEnvoy: true}
	if r.lis != nil {
		for _, node := range nodes {
			keys[r.lis.assemblyKey(node)] = true
		}
	}
	shared := make(map[string]*cache.Snapshot, len(keys))
	for key := range keys {
		snap, err := r.base(key, items)
		if err != nil {
			return nil, err
		}
		shared[key] = snap
	}
	return shared, nil
}

// translateAll returns the items of every service, reusing the memo for
// services whose input and settings did not change.
// A target of a traffic policy ("<service>~<subset>") has its service's
// weights; a service with a policy has its policy's route.
func (r *reconciler) translateAll(exp translate.Expansion, weights map[string]map[string]uint32) []xdscache.ServiceItems {
	in := exp.Snapshot
	r.routeNext = make(map[string]routeMemo, len(exp.Routes))
	defer func() { r.routeMemo, r.routeNext = r.routeNext, nil }()
	next := make(map[string]memoEntry, len(in.Services))
	items := make([]xdscache.ServiceItems, 0, len(in.Services))
	slotted := map[string]bool{} // steady subset services: their endpoints hold slots
	add := func(name string, it xdscache.ServiceItems) {
		if route, ok := r.policyRoute(exp, name); ok {
			it[xdscache.RDS] = route
		}
		items = append(items, it)
	}
	for _, svc := range in.Services {
		set := exp.Settings(svc.Name)
		if translate.UsesSlots(set, len(svc.Endpoints)) {
			slotted[svc.Name] = true
		}
		w := weights[exp.Parent(svc.Name)]
		if old, ok := r.memo[svc.Name]; ok && old.set == set && old.src.Equal(svc) && maps.Equal(old.w, w) {
			next[svc.Name] = old
			add(svc.Name, old.items)
			continue
		}
		e, err := r.translateService(svc, set, w, slotted[svc.Name])
		if err != nil {
			r.m.buildErrors.Inc()
			old, ok := r.memo[svc.Name]
			r.log.Error("service translation failed; keeping its previous resources", "service", svc.Name, "had_previous", ok, "error", err)
			if ok {
				next[svc.Name] = old
				add(svc.Name, old.items)
			}
			continue
		}
		next[svc.Name] = e
		add(svc.Name, e.items)
	}
	r.slots.retain(slotted)
	r.memo = next
	xdscache.SortByName(items)
	return items
}

// translateService translates a service and plans its subsets.
func (r *reconciler) translateService(svc discovery.Service, set translate.ServiceSettings, w map[string]uint32, slotted bool) (memoEntry, error) {
	in := translate.Service(svc, set, w)
	it, err := encodeService(in)
	if err != nil {
		return memoEntry{}, err
	}
	var slots map[string]int
	if slotted {
		ids := make([]string, len(svc.Endpoints))
		for i, ep := range svc.Endpoints {
			ids[i] = ep.ID
		}
		slots = r.slots.assign(svc.Name, sortedCopy(ids))
	}
	var plan *servicePlan
	if !set.Locality.On() { // else a subset per level and place (localities.go)
		if plan, err = newServicePlan(in, set.SubsetSize, set.Subsetting, r.memo[svc.Name].plan, &r.sub.choiceIDs, slots); err != nil {
			return memoEntry{}, err
		}
	}
	e := memoEntry{src: svc, set: set, items: it, plan: plan, w: w, in: in, slots: slots}
	e.view = newViewService(e.plan, e.in, r.memo[svc.Name].view)
	return e, nil
}

// inputs returns the translation inputs of the services with per-node weights.
func (r *reconciler) inputs(nodeW NodeWeights) map[string]envoy.Service {
	out := make(map[string]envoy.Service, len(nodeW))
	for name := range nodeW {
		if e, ok := r.memo[name]; ok {
			out[name] = e.in
		}
	}
	return out
}

// plans lists the subset services among items (sorted by name).
func (r *reconciler) plans(items []xdscache.ServiceItems) []planned {
	var out []planned
	for pos, it := range items {
		if sp := r.memo[it[0].Name].plan; sp != nil {
			out = append(out, planned{pos: pos, sp: sp})
		}
	}
	return out
}

// locals lists the services among items with a locality policy.
func (r *reconciler) locals(items []xdscache.ServiceItems) []localService {
	var out []localService
	for pos, it := range items {
		if e := r.memo[it[0].Name]; e.set.Locality.On() {
			out = append(out, localService{pos: pos, in: e.in, set: e.set, slots: e.slots})
		}
	}
	return out
}

// setLocked gives node its snapshot (see snapshotFor), if its content
// differs from what the node has. changedAt (zero for a first push) is
// recorded per changed type for the push latency metric and, for the
// stage metrics, in pass (nil: none). It reports whether the node was
// given a new snapshot. r.mu must be held.
func (r *reconciler) setLocked(node Node, changedAt time.Time, pass *passTrace) bool {
	snap := r.sub.snapshotFor(node)
	if snap == nil {
		return false
	}
	g := r.nodeSnap[node.ID]
	old := g.snap
	if xdscache.SameVersions(old, snap) {
		return false
	}
	if g.push == nil {
		g.push = r.pushes.node(node.ID)
	}
	g.push.set(old, snap, changedAt, pass)
	g.snap = snap
	r.nodeSnap[node.ID] = g
	if err := r.cache.SetSnapshot(node.ID, snap); err != nil {
		r.log.Error("set snapshot", "node", node.ID, "error", err)
		return false
	}
	r.m.snapshotSets.Inc()
	return true
}

// connected gives a newly connected node its snapshot right away, before
// its first watch is opened, so it never waits for the next rebuild.
func (r *reconciler) connected(id string) {
	node, ok := r.reg.get(id)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ready {
		r.setLocked(node, time.Time{}, nil)
		r.nodesChangedLocked()
	}
}

// forget drops a node's snapshot. The cache's goes under r.mu too: a
// node that came back meanwhile (connected) must not have the snapshot
// it was just given cleared while r still holds it as given.
func (r *reconciler) forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.nodeSnap, id)
	r.pushes.forget(id) // under r.mu: a node set meanwhile gets a new entry
	r.nodesChangedLocked()
	r.cache.Clear(id)
}

func (r *reconciler) isReady() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ready
}

// snapshotOf returns what a node was last given.
func (r *reconciler) snapshotOf(id string) (*cache.Snapshot, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, ok := r.nodeSnap[id]
	return g.snap, ok
}

func (r *reconciler) recordEndpoints(in discovery.Snapshot) {
	r.m.endpoints.Reset()
	for _, svc := range in.Services {
		counts := map[discovery.Health]int{}
		for _, ep := range svc.Endpoints {
			counts[ep.Health]++
		}
		for h := discovery.HealthUnknown; h <= discovery.HealthDraining; h++ {
			r.m.endpoints.WithLabelValues(svc.Name, h.String()).Set(float64(counts[h]))
		}
	}
}

// publishSubsetsLocked publishes the view of the pass that just ended.
// r.mu must be held.
func (r *reconciler) publishSubsetsLocked() {
	svcs := make(map[string]*viewService, len(r.memo))
	for name, e := range r.memo {
		svcs[name] = e.view
		if e.set.Locality.On() {
			svcs[name] = &viewService{local: r.sub.local.view(localService{in: e.in, set: e.set, slots: e.slots})}
		}
	}
	r.views.next(svcs, viewNodes(r.reg, r.placeOf()))
}

// placeOf is how views place nodes: nil (no place needed) unless a
// service of the last pass has a locality policy. r.mu must be held.
func (r *reconciler) placeOf() func(Node) translate.Place {
	if len(r.sub.local.services) == 0 {
		return nil
	}
	return r.sub.local.place
}

// nodesChangedLocked schedules, after the debounce, a view of the last
// pass's services over the nodes known then. r.mu must be held.
func (r *reconciler) nodesChangedLocked() {
	r.views.nodesChanged(r.debounce, &r.mu, func() []viewNode { return viewNodes(r.reg, r.placeOf()) })
}
