package subsetting

// classicPlan is the SRE book's deterministic subsetting. Clients come in
// rounds of count = n / size; round r shuffles the canonical list with
// Python's MT19937 seeded with r; the client with subset id s = client %
// count takes positions [s*size, (s+1)*size) of the round's list.
//
// When n is not a multiple of size, left = n - count*size backends of each
// round are left over. The book leaves over whatever the shuffle puts last;
// here the left-over backends of round r are those at canonical positions
// (r*left + t) mod n for t in [0, left): a window that moves by left every
// round, so the windows of consecutive rounds tile the sorted list and every
// backend is left over once per n/left rounds (floor or ceil). The round's
// list is the shuffled list with the left-over backends moved to its end,
// both parts in shuffled order. Over any number of whole rounds loads differ
// by at most 1, and a partial round adds at most 1 more, so at most 2 apart.
// With left == 0 this is the book's listing unchanged.
type classicPlan struct {
	backends []string
	size     int
	count    int // subsets per round: n / size
	left     int // backends left over per round: n - count*size
	rounds   roundCache
}

func newClassic(ids []string, size int) *classicPlan {
	p := &classicPlan{backends: ids, size: size}
	if size > 0 {
		p.count = len(ids) / size
		p.left = len(ids) - p.count*size
	}
	return p
}

func (p *classicPlan) Backends() []string { return p.backends }
func (p *classicPlan) Size() int          { return p.size }

// Order appends the client's slice of its round's list, then the rest of
// that list from the end of the slice on, wrapping around.
func (p *classicPlan) Order(dst []int, client, n int) []int {
	nb := len(p.backends)
	n = clampN(n, nb)
	if client < 0 || n == 0 {
		return dst
	}
	round := uint64(client / p.count)
	list := p.rounds.get(round, p.buildRound)
	start := (client % p.count) * p.size
	for t := range n {
		dst = append(dst, int(list[(start+t)%nb]))
	}
	return dst
}

// buildRound returns round r's list: the canonical indices shuffled with
// seed r, left-over backends moved to the end.
func (p *classicPlan) buildRound(r uint64) []uint32 {
	nb := len(p.backends)
	list := make([]uint32, nb)
	for i := range list {
		list[i] = uint32(i)
	}
	var m mt19937
	m.seedPython(r)
	m.shufflePython(list)
	if p.left == 0 {
		return list
	}
	// Canonical index i is left over in round r iff (i - r*left) mod n < left.
	first := int((r % uint64(nb)) * uint64(p.left) % uint64(nb))
	isLeft := func(i uint32) bool { return (int(i)-first+nb)%nb < p.left }
	out := make([]uint32, 0, nb)
	for _, i := range list {
		if !isLeft(i) {
			out = append(out, i)
		}
	}
	for _, i := range list {
		if isLeft(i) {
			out = append(out, i)
		}
	}
	return out
}
