package main

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/xds-server/xds-server/subsetting"
)

// boundedLoad is bounded-load rendezvous, simulated as the exact-balance
// reference the steady design was measured against: client i ranks the
// backends by a hash of (i, id) and takes its best k among those with fewer
// than ceil((i+1)*k/n) clients so far, which keeps every prefix of clients
// perfectly balanced. Every client depends on all clients before it, so one
// backend more or less changes the caps and re-routes many of them. It is
// not part of package subsetting.
type boundedLoad struct {
	ids    []string
	size   int
	orders [][]int // per client: subset, then the rest by rank
}

func newBoundedLoad(ids []string, size, clients int) (subsetting.Plan, error) {
	if size < 1 {
		return nil, fmt.Errorf("subsetsim: size %d", size)
	}
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	n := len(ids)
	p := &boundedLoad{ids: ids, size: min(size, n), orders: make([][]int, clients)}
	hashes := make([]uint64, n)
	for i, id := range ids {
		hashes[i] = mix(fnv64a(id))
	}
	loads := make([]int, n)
	for c := range clients {
		rank := make([]int, n)
		score := make([]uint64, n)
		for b := range n {
			rank[b], score[b] = b, mix(hashes[b]^mix(uint64(c)+0x9e3779b97f4a7c15))
		}
		slices.SortFunc(rank, func(a, b int) int { return cmp.Compare(score[b], score[a]) })
		limit := ((c+1)*p.size + n - 1) / n
		order := make([]int, 0, n)
		for _, b := range rank {
			if len(order) < p.size && loads[b] < limit {
				order = append(order, b)
				loads[b]++
			}
		}
		for _, b := range rank { // caps too tight: fill the subset anyway
			if len(order) < p.size && !slices.Contains(order, b) {
				order = append(order, b)
				loads[b]++
			}
		}
		for _, b := range rank {
			if !slices.Contains(order, b) {
				order = append(order, b)
			}
		}
		p.orders[c] = order
	}
	return p, nil
}

func (p *boundedLoad) Backends() []string { return p.ids }
func (p *boundedLoad) Size() int          { return p.size }

func (p *boundedLoad) Order(dst []int, client, n int) []int {
	if client < 0 || client >= len(p.orders) {
		return dst
	}
	return append(dst, p.orders[client][:max(0, min(n, len(p.ids)))]...)
}

// fnv64a is the 64-bit FNV-1a hash of s.
func fnv64a(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// mix is SplitMix64's finalizer. subsetting has the same function
// (mix64, unexported) and it stays a copy on purpose: this reference must
// not move when subsetting's hashing does, or the measurements against it
// would shift with the code they judge.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
