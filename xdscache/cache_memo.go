package xdscache

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/types/known/anypb"
)

// The nodes of a group move together from one shared snapshot to the
// next, so what a wildcard stream is sent on a change (the resources of
// the new version map that differ from the old one's, and whether one
// left) is the same for every node of the group: it is worked out once
// per pair of version maps and kept, not per node. Version maps are
// immutable once a snapshot is built, so a map's identity stands for its
// content. The memos keep the last answers only (a few groups change at
// once; the rest recompute, which is what every node did before).

// mapID is the identity of a map.
func mapID(m map[string]string) unsafe.Pointer {
	return reflect.ValueOf(m).UnsafePointer()
}

// recent keeps the last few values worked out from one or two version
// maps, by the maps' identities. An entry holds its maps, so that their
// identities stay theirs while it is kept.
type recent[V any] struct{ few lastFew[[2]unsafe.Pointer, V] }

// of returns the value kept for (a, b), else make(a, b), kept.
func (r *recent[V]) of(a, b map[string]string, make func(a, b map[string]string) V) V {
	key := [2]unsafe.Pointer{mapID(a), mapID(b)}
	if v, ok := r.few.lookup(key); ok { // no hold nor closure made for a hit
		return v
	}
	v, _ := r.few.get(key, [2]map[string]string{a, b}, func() (V, error) { return make(a, b), nil })
	return v
}

// wildcardDiff is what a stream holding the version map from must be sent
// to hold to: the names in to whose hash differs or that from lacks, and
// the names of from not in to, both sorted. Read only: shared by every
// answer.
type wildcardDiff struct {
	changed, removed []string
}

// diffs are the wildcard diffs of every cache of the process (keyed by
// map identities, so caches cannot mix them up); sortedKeys the sorted
// names of version maps.
var (
	diffs      recent[*wildcardDiff]
	sortedKeys recent[[]string]
)

// diffOf returns the diff from -> to, computing it if it is not kept.
func diffOf(from, to map[string]string) *wildcardDiff {
	return diffs.of(from, to, func(from, to map[string]string) *wildcardDiff {
		w := &wildcardDiff{}
		for name, hash := range to {
			if v, ok := from[name]; !ok || v != hash {
				w.changed = append(w.changed, name)
			}
		}
		for name := range from {
			if _, ok := to[name]; !ok {
				w.removed = append(w.removed, name)
			}
		}
		slices.Sort(w.changed)
		slices.Sort(w.removed)
		return w
	})
}

// namesOf returns the sorted keys of m (read only).
func namesOf(m map[string]string) []string {
	return sortedKeys.of(m, nil, func(m, _ map[string]string) []string { return slices.Sorted(maps.Keys(m)) })
}

// Responses that carry the same resources (a group's nodes moving to the
// same snapshot, or new streams sent every resource of a type) carry one
// shared slice of them, so that the codec, which keys on the slice's
// identity, encodes them once for all those nodes rather than once per
// node (xds/codec.go). The resources are those of one snapshot type's
// items (immutable) under the given names (a shared, read-only slice):
// identities stand for their content, as above.
var (
	anySlices      resourceMemo[*anypb.Any]
	resourceSlices resourceMemo[*discoverygrpc.Resource]
)

// resourceMemo keeps the last few resource slices built, by the identities of
// their names and items and their type URL. An entry holds its names and
// items, so that their identities stay theirs while it is kept.
type resourceMemo[R any] struct{ few lastFew[resourceKey, []R] }

// resourceKey identifies the resources of names (a slice's identity and
// length) of items (a map's identity) under a type URL.
type resourceKey struct {
	names unsafe.Pointer
	n     int
	items unsafe.Pointer
	url   string
}

// resourceHold is what an entry holds for its key's identities.
type resourceHold struct {
	names []string
	items map[string]types.ResourceWithTTL
}

// of returns the slice kept for (names, items, url), else build's, kept.
// A slice of no resources is not kept.
func (s *resourceMemo[R]) of(names []string, items map[string]types.ResourceWithTTL, url string, build func() ([]R, error)) ([]R, error) {
	if len(names) == 0 {
		return build()
	}
	key := resourceKey{names: unsafe.Pointer(unsafe.SliceData(names)), n: len(names), items: reflect.ValueOf(items).UnsafePointer(), url: url}
	if v, ok := s.few.lookup(key); ok { // no hold made for a hit
		return v, nil
	}
	return s.few.get(key, resourceHold{names, items}, build)
}

// lastFew keeps the last few values built, by key, and builds each value
// once: the goroutines that miss a key while it is being built wait for
// that build rather than build it too. This is what makes a value's
// identity shared: the first streams of a connect storm come at once, and
// two slices of the same resources would be two heads for the codec to
// encode and the send budget to hold (TestPendingBytesShared caught two
// streams missing the same key together). A failed build is not kept;
// its waiters get its error.
type lastFew[K comparable, V any] struct {
	slots [8]atomic.Pointer[fewEntry[K, V]]
	next  atomic.Uint32

	mu       sync.Mutex
	building map[K]*fewBuild[V] // keys being built, at most one build each
}

type fewEntry[K comparable, V any] struct {
	key  K
	hold any // keeps the identities the key is made of
	v    V
}

// fewBuild is one build in progress; v and err are set before done is
// closed.
type fewBuild[V any] struct {
	done chan struct{}
	v    V
	err  error
}

// lookup returns the value kept for key.
func (m *lastFew[K, V]) lookup(key K) (V, bool) {
	for i := range m.slots {
		if e := m.slots[i].Load(); e != nil && e.key == key {
			return e.v, true
		}
	}
	var zero V
	return zero, false
}

// get returns the value kept for key, else the value of the build in
// progress for it, else build's, kept with hold.
func (m *lastFew[K, V]) get(key K, hold any, build func() (V, error)) (V, error) {
	if v, ok := m.lookup(key); ok {
		return v, nil
	}
	m.mu.Lock()
	if v, ok := m.lookup(key); ok { // kept since the look above
		m.mu.Unlock()
		return v, nil
	}
	if b, ok := m.building[key]; ok {
		m.mu.Unlock()
		<-b.done
		return b.v, b.err
	}
	b := &fewBuild[V]{done: make(chan struct{})}
	if m.building == nil {
		m.building = map[K]*fewBuild[V]{}
	}
	m.building[key] = b
	m.mu.Unlock()
	defer func() { // also if build panics: its waiters must not hang
		m.mu.Lock()
		if b.err == nil {
			m.slots[m.next.Add(1)%uint32(len(m.slots))].Store(&fewEntry[K, V]{key: key, hold: hold, v: b.v})
		}
		delete(m.building, key)
		m.mu.Unlock()
		close(b.done)
	}()
	b.err = errBuildPanicked
	b.v, b.err = build()
	return b.v, b.err
}

// errBuildPanicked is the error the waiters of a build that panicked get.
var errBuildPanicked = errors.New("xdscache: building a shared value panicked")
