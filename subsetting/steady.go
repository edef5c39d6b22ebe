package subsetting

import (
	"math/bits"
	"sort"
)

// Salts that make ring positions, rotations and ring sizes independent of
// each other.
const (
	ringSalt     = 0x5851f42d4c957f2d
	rotationSalt = 0x2545f4914f6cdd1d
	splitSalt    = 0x14057b7ef767814f
)

// maxBlockBits bounds the blocks of clients sharing a ring to 2^5 = 32
// clients.
const maxBlockBits = 5

// steadyPlan is consistent subsetting on rings. Client indices are cut into
// aligned blocks of 32 clients (fewer when n < 32*sqrt(k), see ringOf); each
// block has a ring of 2^64 positions on which every backend sits at a hash
// of (block, id) and the block's clients sit evenly spaced; a client's
// preference order is the ring walked clockwise from its position. See
// doc.go.
type steadyPlan struct {
	backends []string
	size     int
	hash     []uint64 // by canonical index: mix64(fnv1a(id))
	fixed    bool     // n >= 32*sqrt(k): every block has 32 clients
	rings    roundCache
}

func newSteady(ids []string, size int) *steadyPlan {
	n, k := uint64(len(ids)), uint64(size)
	p := &steadyPlan{backends: ids, size: size, hash: make([]uint64, len(ids)), fixed: n*n >= k<<(2*maxBlockBits)}
	for i, id := range ids {
		p.hash[i] = mix64(fnv1a(id))
	}
	return p
}

func (p *steadyPlan) Backends() []string { return p.backends }
func (p *steadyPlan) Size() int          { return p.size }

// Order appends the backends met walking clockwise from the client's
// position on its block's ring.
func (p *steadyPlan) Order(dst []int, client, n int) []int {
	nb := len(p.backends)
	n = clampN(n, nb)
	if client < 0 || n == 0 {
		return dst
	}
	first := p.ringOf(uint64(client))
	ring := p.rings.get(first, p.buildRing)
	key := ringKey(first)
	at := clientPosition(uint64(client)-first, key)
	start := sort.Search(nb, func(i int) bool { return p.position(ring[i], key) >= at })
	for t := range n {
		dst = append(dst, int(ring[(start+t)%nb]))
	}
	return dst
}

// ringOf returns the first client of client's block of clients: the
// aligned block of 32 clients, split in halves while it is too big. A block
// of s clients splits when s*sqrt(k) > n*f, f in [1, 2) a hash of the
// block, so that a ring puts each backend in at most about 2*sqrt(k)
// subsets (see doc.go). With n >= 32*sqrt(k) nothing ever splits; below,
// each block's threshold differs, so one backend more or less re-cuts few
// blocks at a time. A block's ring depends only on its first client: when a
// block splits or merges, its first half keeps its ring and positions.
func (p *steadyPlan) ringOf(client uint64) uint64 {
	if p.fixed {
		return client >> maxBlockBits << maxBlockBits
	}
	n, k := uint64(len(p.backends)), uint64(p.size)
	for level := maxBlockBits; level > 0; level-- {
		first := client >> level << level
		f, _ := bits.Mul64(n, mix64(first^mix64(uint64(level)^splitSalt)))
		nf := n + f // floor(n * f), f in [1, 2); n < 1024 here (else p.fixed)
		if s := uint64(1) << level; s*s*k <= nf*nf {
			return first
		}
	}
	return client
}

// buildRing returns the canonical indices sorted by their position on the
// ring of the block starting at client first (ties, which need a 64-bit
// collision, by index). It is a bucket sort on the top bits of the
// positions, which are uniform, then an insertion sort of each bucket:
// linear time on average.
func (p *steadyPlan) buildRing(first uint64) []uint32 {
	n := len(p.backends)
	key := ringKey(first)
	shift := 64 - bits.Len(uint(n)) // n+1..2n buckets: under one entry each on average
	starts := make([]int, 1<<(64-shift)+1)
	pos := make([]uint64, n)
	for i := range n {
		pos[i] = p.position(uint32(i), key)
		starts[pos[i]>>shift+1]++
	}
	for b := 1; b < len(starts); b++ {
		starts[b] += starts[b-1]
	}
	ring := make([]uint32, n)
	sorted := make([]uint64, n)
	for i := range n { // by index within a bucket
		b := pos[i] >> shift
		ring[starts[b]], sorted[starts[b]] = uint32(i), pos[i]
		starts[b]++
	}
	for i := 1; i < n; i++ { // buckets are in order; fix each one
		x, id := sorted[i], ring[i]
		j := i
		for ; j > 0 && sorted[j-1] > x; j-- {
			sorted[j], ring[j] = sorted[j-1], ring[j-1]
		}
		sorted[j], ring[j] = x, id
	}
	return ring
}

// position is backend i's place on the ring with key.
func (p *steadyPlan) position(i uint32, key uint64) uint64 {
	return mix64(p.hash[i] ^ key)
}

// ringKey is the key of the ring of the block starting at client first.
func ringKey(first uint64) uint64 { return mix64(first ^ ringSalt) }

// clientPosition places the j-th client of a block at j's bits reversed
// (the van der Corput sequence scaled to 2^64), turned by a hash of the
// block: the first 2^m clients of a block are evenly spaced whatever its
// size, so a partly used block is spread over the whole ring.
func clientPosition(j, key uint64) uint64 {
	return bits.Reverse64(j) + mix64(key^rotationSalt)
}

// fnv1a is the 64-bit FNV-1a hash of s.
func fnv1a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix64 is SplitMix64's finalizer: a bijection on uint64 with full
// avalanche.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
