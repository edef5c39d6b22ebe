package xds

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strconv"
	"strings"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
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
}

// variantRef is the variant an index uses, with its key in variants.
type variantRef struct {
	key  string
	snap *cache.Snapshot
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

	choiceIDs uint64 // numbers choices across plans

	items    []serviceItems             // every service's items, sorted by name
	planned  []planned                  // the subset services among them
	shared   map[string]*cache.Snapshot // assembly key -> base snapshot
	sigs     map[string]string          // assembly key -> baseSig of its base
	variants map[string]*cache.Snapshot // assembly key + "/" + choice ids -> variant
	byIndex  map[indexKey]variantRef    // this pass's lookups
}

func newSubsets(m *metrics, log *slog.Logger) *subsets {
	return &subsets{m: m, log: log, sigs: map[string]string{},
		variants: map[string]*cache.Snapshot{}, byIndex: map[indexKey]variantRef{}}
}

// rebase starts a reconcile pass over new items, plans and bases; variants
// whose base changed outside the subset load assignments are dropped.
func (v *subsets) rebase(items []serviceItems, plans []planned, shared map[string]*cache.Snapshot) {
	v.items, v.planned, v.shared = items, plans, shared
	v.byIndex = map[indexKey]variantRef{}
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
	live := make(map[string]bool, len(v.byIndex))
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
}

// baseSig summarizes what a variant takes from its base: every type's
// version but endpoints', and the load assignments of services without
// subsetting.
func (v *subsets) baseSig(base *cache.Snapshot) string {
	h := sha256.New()
	for _, k := range kinds {
		if k != types.Endpoint {
			h.Write([]byte(base.Resources[k].Version))
			h.Write([]byte{0})
		}
	}
	next := 0
	for pos, it := range v.items {
		h.Write([]byte(it[edsKind].name))
		h.Write([]byte{0})
		if next < len(v.planned) && v.planned[next].pos == pos {
			next++
			continue
		}
		h.Write([]byte(it[edsKind].hash))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// snapshotFor returns what node should have: the shared snapshot of its
// assembly key, or, with subsetting, the variant of its client index.
func (v *subsets) snapshotFor(node Node) *cache.Snapshot {
	base := v.shared[assemblyKey(node)]
	if base == nil || len(v.planned) == 0 || node.Index < 0 {
		return base
	}
	ik := indexKey{assemblyKey(node), node.Index}
	if ref, ok := v.byIndex[ik]; ok {
		return ref.snap
	}
	var key strings.Builder
	key.WriteString(ik.assembly)
	repl := make(map[int]item, len(v.planned))
	for _, p := range v.planned {
		c, err := p.sp.choose(node.Index)
		if err != nil {
			v.m.buildErrors.Inc()
			v.log.Error("subset translation failed; node gets every endpoint", "service", p.sp.name, "node", node.ID, "error", err)
			continue
		}
		repl[p.pos] = c.eds
		key.WriteByte('/')
		key.WriteString(strconv.FormatUint(c.id, 10))
	}
	k := key.String()
	s, ok := v.variants[k]
	if !ok {
		s = variant(base, v.items, repl)
		v.variants[k] = s
	}
	v.byIndex[ik] = variantRef{key: k, snap: s}
	return s
}
