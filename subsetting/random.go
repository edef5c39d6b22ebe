package subsetting

import (
	"math/bits"
	"sync"
)

// randomSalt seeds the per-client generators of randomPlan.
const randomSalt = 0x9e3779b97f4a7c15

// randomPlan gives each client a Fisher-Yates shuffle of the canonical list
// seeded with its index (the SRE book's random subsetting). It is the
// simulator's baseline: loads are binomial and one added backend shifts
// every client's shuffle.
type randomPlan struct {
	backends []string
	size     int
	scratch  sync.Pool // *[]uint32 of len(backends)
}

func newRandom(ids []string, size int) *randomPlan {
	p := &randomPlan{backends: ids, size: size}
	p.scratch.New = func() any {
		s := make([]uint32, len(ids))
		return &s
	}
	return p
}

func (p *randomPlan) Backends() []string { return p.backends }
func (p *randomPlan) Size() int          { return p.size }

// Order appends the first n picks of the client's forward Fisher-Yates
// shuffle: pick t is drawn uniformly from the backends not yet picked.
func (p *randomPlan) Order(dst []int, client, n int) []int {
	nb := len(p.backends)
	n = clampN(n, nb)
	if client < 0 || n == 0 {
		return dst
	}
	sp := p.scratch.Get().(*[]uint32)
	defer p.scratch.Put(sp)
	s := *sp
	for i := range s {
		s[i] = uint32(i)
	}
	state := mix64(uint64(client) ^ randomSalt)
	for t := range n {
		state += randomSalt
		hi, _ := bits.Mul64(mix64(state), uint64(nb-t)) // uniform in [0, nb-t), bias < 2^-50
		j := t + int(hi)
		s[t], s[j] = s[j], s[t]
		dst = append(dst, int(s[t]))
	}
	return dst
}
