package xdscache

import (
	"maps"
	"reflect"
	"slices"
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
type recent[V any] struct {
	slots [8]atomic.Pointer[recentEntry[V]]
	next  atomic.Uint32
}

type recentEntry[V any] struct {
	a, b map[string]string
	v    V
}

// of returns the value kept for (a, b), else make(a, b), kept.
func (r *recent[V]) of(a, b map[string]string, make func(a, b map[string]string) V) V {
	ia, ib := mapID(a), mapID(b)
	for i := range r.slots {
		if e := r.slots[i].Load(); e != nil && mapID(e.a) == ia && mapID(e.b) == ib {
			return e.v
		}
	}
	e := &recentEntry[V]{a: a, b: b, v: make(a, b)}
	r.slots[r.next.Add(1)%uint32(len(r.slots))].Store(e)
	return e.v
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
type resourceMemo[R any] struct {
	slots [8]atomic.Pointer[resourceMemoEntry[R]]
	next  atomic.Uint32
}

type resourceMemoEntry[R any] struct {
	names []string
	items map[string]types.ResourceWithTTL
	url   string
	v     []R
}

// of returns the slice kept for (names, items, url), else build's, kept.
// A slice of no resources is not kept.
func (s *resourceMemo[R]) of(names []string, items map[string]types.ResourceWithTTL, url string, build func() ([]R, error)) ([]R, error) {
	if len(names) == 0 {
		return build()
	}
	in, ii := unsafe.SliceData(names), reflect.ValueOf(items).UnsafePointer()
	for i := range s.slots {
		if e := s.slots[i].Load(); e != nil && unsafe.SliceData(e.names) == in && len(e.names) == len(names) &&
			reflect.ValueOf(e.items).UnsafePointer() == ii && e.url == url {
			return e.v, nil
		}
	}
	v, err := build()
	if err != nil {
		return nil, err
	}
	s.slots[s.next.Add(1)%uint32(len(s.slots))].Store(&resourceMemoEntry[R]{names: names, items: items, url: url, v: v})
	return v, nil
}
