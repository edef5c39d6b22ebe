package xds

import (
	"maps"
	"reflect"
	"slices"
	"sync/atomic"
	"unsafe"
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

// wildcardDiff is what a stream holding the version map from must be sent
// to hold to: the names in to whose hash differs or that from lacks, and
// the names of from not in to, both sorted.
type wildcardDiff struct {
	from, to map[string]string // held, so that their identities stay theirs
	changed  []string          // read only: shared by every answer
	removed  []string          // read only
}

// diffMemo keeps the last few wildcard diffs.
type diffMemo struct {
	slots [4]atomic.Pointer[wildcardDiff]
	next  atomic.Uint32
}

// diffs are the wildcard diffs of every cache of the process (keyed by
// map identities, so caches cannot mix them up).
var diffs diffMemo

// of returns the diff from -> to, computing it if it is not kept.
func (d *diffMemo) of(from, to map[string]string) *wildcardDiff {
	f, t := mapID(from), mapID(to)
	for i := range d.slots {
		if w := d.slots[i].Load(); w != nil && mapID(w.from) == f && mapID(w.to) == t {
			return w
		}
	}
	w := &wildcardDiff{from: from, to: to}
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
	d.slots[d.next.Add(1)%uint32(len(d.slots))].Store(w)
	return w
}

// sortedNames keeps the sorted names of the last few version maps.
type sortedNames struct {
	slots [4]atomic.Pointer[namesOf]
	next  atomic.Uint32
}

type namesOf struct {
	m     map[string]string // held, so that its identity stays its own
	names []string          // read only
}

var sortedKeys sortedNames

// of returns the sorted keys of m (read only).
func (s *sortedNames) of(m map[string]string) []string {
	id := mapID(m)
	for i := range s.slots {
		if n := s.slots[i].Load(); n != nil && mapID(n.m) == id {
			return n.names
		}
	}
	n := &namesOf{m: m, names: slices.Sorted(maps.Keys(m))}
	s.slots[s.next.Add(1)%uint32(len(s.slots))].Store(n)
	return n.names
}
