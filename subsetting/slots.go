package subsetting

import (
	"fmt"
	"math/bits"
	"slices"
	"sort"
)

// NewSlotted builds the steady plan over stable backend slots: slots maps
// each backend id to its slot, a small non-negative integer that the
// backend keeps while it is registered (and for a while after it leaves),
// like a task index of a job. Distinct backends must have distinct slots;
// gaps are allowed (a backend left, its slot is free).
//
// This is Ringsteady (ACM Queue 2022) with slots for task indices: on a
// ring of 2^64 positions, the backend in slot s sits at bitreverse64(s)
// and client i at bitreverse64(i): both follow the binary van der Corput
// sequence, so any prefix of either is evenly spread. A client's order is
// the ring walked clockwise from its position; its subset is the first
// size backends. Nothing depends on the number of clients, and a backend
// joining (in a free slot) or leaving (freeing its own) only changes the
// subsets whose window it enters or leaves, by one member each.
func NewSlotted(slots map[string]int, size int) (Plan, error) {
	if size < 1 {
		return nil, fmt.Errorf("%w (got %d)", ErrSize, size)
	}
	ids := make([]string, 0, len(slots))
	owner := make(map[int]string, len(slots))
	for id, s := range slots {
		if s < 0 {
			return nil, fmt.Errorf("subsetting: backend %q: slot %d is negative", id, s)
		}
		if other, ok := owner[s]; ok {
			return nil, fmt.Errorf("subsetting: backends %q and %q share slot %d", min(id, other), max(id, other), s)
		}
		owner[s] = id
		ids = append(ids, id)
	}
	slices.Sort(ids)
	p := &slottedPlan{backends: ids, size: min(size, len(ids)),
		pos: make([]uint64, len(ids)), byPos: make([]int, len(ids))}
	for i := range ids {
		p.byPos[i] = i
	}
	slices.SortFunc(p.byPos, func(a, b int) int {
		return cmpUint64(ringPos(slots[ids[a]]), ringPos(slots[ids[b]]))
	})
	for k, i := range p.byPos {
		p.pos[k] = ringPos(slots[ids[i]])
	}
	return p, nil
}

// slottedPlan is immutable after NewSlotted.
type slottedPlan struct {
	backends []string
	size     int
	pos      []uint64 // ring positions, ascending
	byPos    []int    // backend index at each position
}

func (p *slottedPlan) Backends() []string { return p.backends }
func (p *slottedPlan) Size() int          { return p.size }

// Order implements Plan: the ring walked clockwise from the client.
func (p *slottedPlan) Order(dst []int, client, n int) []int {
	n = min(n, len(p.backends))
	if client < 0 || n <= 0 {
		return dst
	}
	at := ringPos(client)
	start := sort.Search(len(p.pos), func(k int) bool { return p.pos[k] >= at })
	for k := range n {
		dst = append(dst, p.byPos[(start+k)%len(p.byPos)])
	}
	return dst
}

// ringPos is the position of slot or client index i: the binary van der
// Corput sequence scaled to 2^64.
func ringPos(i int) uint64 { return bits.Reverse64(uint64(i)) }

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
