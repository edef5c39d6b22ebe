package xds

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"maps"
	"strconv"
	"strings"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"

	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/xdscache"
)

// planned is a subset service and its position in the items.
type planned struct {
	pos int
	sp  *servicePlan
}

// indexKey identifies nodes that surely get the same snapshot.
type indexKey struct {
	assembly string
	index    int
	place    string // translate.Place.Key when services depend on it
}

// variantRef is a variant with its key in variants: what variants hold,
// and what an index uses.
type variantRef struct {
	key  string
	snap *cache.Snapshot
}

// keyBuf builds a variant key: the assembly key, then a tagged id per
// replaced load assignment.
type keyBuf []byte

// id appends "/", tag and n.
func (k *keyBuf) id(tag string, n uint64) {
	*k = strconv.AppendUint(append(append(*k, '/'), tag...), n, 10)
}

// subsets builds the per-node variants of the shared snapshots: each
// subset service's load assignment replaced by the node's pick. Variants
// are keyed by assembly key and choice ids, so nodes with equal picks share
// one; they outlive a reconcile pass when the base is unchanged outside the
// subset services' load assignments, so a change that leaves a node's
// picks alone leaves its snapshot (the same object) alone. Used under the
// reconciler's lock.
type subsets struct {
	m   *metrics
	log *slog.Logger

	keyOf func(Node) string                         // a node's assembly key
	build func(key string) (*cache.Snapshot, error) // the base of a key no node had at rebase

	choiceIDs uint64 // numbers choices across plans
	rebases   uint64 // passes started (rebase calls): what subsetStats' cache is keyed by
	stats     statsMemo

	items    []xdscache.ServiceItems    // every service's items, sorted by name
	planned  []planned                  // the subset services among them
	shared   map[string]*cache.Snapshot // assembly key -> base snapshot
	sigs     map[string]string          // assembly key -> baseSig of its base
	variants map[string]*variantRef     // assembly key + "/" + choice ids -> variant
	byIndex  map[indexKey]variantRef    // this pass's lookups

	// Scratch of snapshotFor, reused node after node (a pass meets every
	// node: their maps and keys were most of a subset pass's garbage).
	repl map[int]xdscache.Item
	key  keyBuf

	nodeW   NodeWeights              // per-node weights of this pass
	inputs  map[string]envoy.Service // service -> translation input (for nodeW)
	perNode weightedSet              // service -> node -> its weighted load assignment
	ownLive map[string]bool          // variants of nodes with weights of their own, this pass
	local   localized                // load assignments of services with a locality policy
}

func newSubsets(m *metrics, log *slog.Logger) *subsets {
	return &subsets{m: m, log: log, sigs: map[string]string{},
		variants: map[string]*variantRef{}, byIndex: map[indexKey]variantRef{}, repl: map[int]xdscache.Item{},
		perNode: weightedSet{}, ownLive: map[string]bool{}}
}

// rebase starts a reconcile pass over new items, plans and bases, with the
// per-node weights nodeW of services whose inputs are given; variants
// whose base changed outside the subset load assignments are dropped.
func (v *subsets) rebase(items []xdscache.ServiceItems, plans []planned, shared map[string]*cache.Snapshot, nodeW NodeWeights, inputs map[string]envoy.Service, locals []localService) {
	v.items, v.planned, v.shared, v.local.services = items, plans, shared, locals
	v.rebases++
	v.nodeW, v.inputs = nodeW, inputs
	v.byIndex, v.ownLive = map[indexKey]variantRef{}, map[string]bool{}
	sigs := make(map[string]string, len(shared))
	for key, base := range shared {
		sigs[key] = v.baseSig(base)
	}
	for k := range v.variants {
		assembly, _, _ := strings.Cut(k, "/")
		if sigs[assembly] != v.sigs[assembly] {
			delete(v.variants, k)
		}
	}
	v.sigs = sigs
}

// settle ends a pass over every known node: variants no index uses are
// dropped, and plans stop carrying picks over from their predecessors.
func (v *subsets) settle() {
	live := maps.Clone(v.ownLive)
	for _, ref := range v.byIndex {
		live[ref.key] = true
	}
	for k := range v.variants {
		if !live[k] {
			delete(v.variants, k)
		}
	}
	for _, p := range v.planned {
		p.sp.forgetPrev()
	}
	v.perNode.settle()
	v.local.observe(v.m)
	v.local.settle()
}

// baseSig summarizes what a variant takes from its base: every type's
// version but endpoints', and the load assignments of services without
// subsetting.
func (v *subsets) baseSig(base *cache.Snapshot) string {
	h := sha256.New()
	for _, k := range xdscache.Kinds {
		if k != types.Endpoint {
			h.Write([]byte(base.Resources[k].Version))
			h.Write([]byte{0})
		}
	}
	next := 0
	for pos, it := range v.items {
		h.Write([]byte(it[xdscache.EDS].Name))
		h.Write([]byte{0})
		if next < len(v.planned) && v.planned[next].pos == pos {
			next++
			continue
		}
		h.Write([]byte(it[xdscache.EDS].Hash))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// snapshotFor returns what node should have: the shared snapshot of its
// assembly key, or, with subsetting or per-node weights, its variant.
// Nodes without weights of their own share the variant of their client
// index.
func (v *subsets) snapshotFor(node Node) *cache.Snapshot {
	akey := v.keyOf(node)
	base := v.base(akey)
	if base == nil {
		return nil
	}
	own := v.nodeServices(node.ID)
	subset := len(v.planned) > 0 && node.Index >= 0
	local := len(v.local.services) > 0
	if !subset && len(own) == 0 && !local {
		return base
	}
	ik := indexKey{assembly: akey, index: node.Index}
	var at translate.Place
	if local {
		at = v.local.place(node)
		ik.place = at.Key()
	}
	if ref, ok := v.byIndex[ik]; ok && len(own) == 0 {
		return ref.snap
	}
	key, repl := &v.key, v.repl
	*key = append((*key)[:0], ik.assembly...)
	clear(repl)
	if subset {
		v.replaceSubsets(node, repl, key)
	}
	if local {
		v.replaceLocal(node, at, ik.place, repl, key)
	}
	for _, pos := range own {
		if _, done := repl[pos]; done {
			continue
		}
		name := v.items[pos][xdscache.EDS].Name
		we, err := v.weighted(pos, node.ID, v.items[pos][xdscache.EDS].Hash, v.inputs[name].Endpoints, v.nodeW[name][node.ID])
		if err != nil {
			v.translateFailed(name, node.ID, err)
			continue
		}
		repl[pos] = we.eds
		key.id("n", we.id)
	}
	vr, ok := v.variants[string(*key)] // no string made for a lookup
	if !ok {
		vr = &variantRef{key: string(*key), snap: xdscache.Variant(base, v.items, repl)}
		v.variants[vr.key] = vr
	}
	k, s := vr.key, vr.snap
	if len(own) == 0 {
		v.byIndex[ik] = *vr
	} else {
		v.ownLive[k] = true
	}
	return s
}

// base returns the shared snapshot of an assembly key, building it when
// a node brings a key no node had at the start of the pass (nil if the
// pass has not started, or the build failed).
func (v *subsets) base(key string) *cache.Snapshot {
	if b, ok := v.shared[key]; ok || v.shared == nil || v.build == nil {
		return b
	}
	b, err := v.build(key)
	if err != nil {
		v.m.buildErrors.Inc()
		v.log.Error("snapshot rejected; nodes of this assembly keep their previous config", "assembly", key, "error", err)
		return nil
	}
	v.shared[key] = b
	v.sigs[key] = v.baseSig(b)
	return b
}

// replaceSubsets puts node's pick of every subset service into repl, with
// the node's own weights where it has them, and their ids into key.
func (v *subsets) replaceSubsets(node Node, repl map[int]xdscache.Item, key *keyBuf) {
	for _, p := range v.planned {
		c, err := p.sp.choose(node.Index)
		if err != nil {
			v.translateFailed(p.sp.name, node.ID, err)
			continue
		}
		v.put(p.pos, node.ID, shared{eds: c.eds, id: c.id, tag: "c", in: v.inputs[p.sp.name], sp: p.sp, choice: c.choice}, repl, key)
	}
}

// shared is a load assignment nodes share (a subset pick, or a place's
// localized one): its item and id (tagged in variant keys and as the
// source of a node's weighted copy), and its translation input and
// endpoints, for that copy: eps, or for a subset pick its plan's members
// of choice, worked out only for a node with weights of its own (every
// node of a pass meets every subset service: 500,000 picks at 10,000
// nodes x 50 services, which made the subset variant's change 3-4x
// slower when each built its endpoint list).
type shared struct {
	eds    xdscache.Item
	id     uint64
	tag    string
	in     envoy.Service
	eps    []envoy.Endpoint
	sp     *servicePlan
	choice *choice
}

// endpoints are sh's endpoints, for a weighted copy.
func (sh shared) endpoints() []envoy.Endpoint {
	if sh.sp != nil {
		return sh.sp.members(sh.choice)
	}
	return sh.eps
}

// put puts into repl at pos what node gets of sh: sh itself, or, when the
// node has weights of its own for the service, its weighted copy; and its
// id into key.
func (v *subsets) put(pos int, node string, sh shared, repl map[int]xdscache.Item, key *keyBuf) {
	name := v.items[pos][xdscache.EDS].Name
	if w := v.nodeW[name][node]; w != nil {
		we, err := v.perNode.get(name, sh.in, node, sh.tag+strconv.FormatUint(sh.id, 10), sh.endpoints, w, &v.choiceIDs)
		if err != nil {
			v.translateFailed(name, node, err)
			return
		}
		repl[pos] = we.eds
		key.id("n", we.id)
		return
	}
	repl[pos] = sh.eds
	key.id(sh.tag, sh.id)
}

func (v *subsets) translateFailed(service, node string, err error) {
	v.m.buildErrors.Inc()
	v.log.Error("subset translation failed; node gets the shared endpoints", "service", service, "node", node, "error", err)
}

// nodeServices lists, in item order, the positions of the services that
// have weights of their own for node.
func (v *subsets) nodeServices(node string) []int {
	var out []int
	for pos, it := range v.items {
		if v.nodeW[it[xdscache.EDS].Name][node] != nil {
			out = append(out, pos)
		}
	}
	return out
}

// weighted returns node's load assignment of service pos with its weights
// w (see weightedSet.get).
func (v *subsets) weighted(pos int, node, src string, eps []envoy.Endpoint, w map[string]uint32) (*weightedEDS, error) {
	name := v.items[pos][xdscache.EDS].Name
	return v.perNode.get(name, v.inputs[name], node, src, func() []envoy.Endpoint { return eps }, w, &v.choiceIDs)
}
