package subsetting

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// randomIDs returns n distinct random ids, like Consul service ids.
func randomIDs(r *rand.Rand, n int) []string {
	seen := make(map[string]bool, n)
	out := make([]string, 0, n)
	for len(out) < n {
		id := fmt.Sprintf("web-%08x-%04x", r.Uint32(), r.Uint32()&0xffff)
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// subsetIDs returns client's subset as a set of ids.
func subsetIDs(p Plan, client int) map[string]bool {
	out := make(map[string]bool, p.Size())
	for _, i := range p.Order(nil, client, p.Size()) {
		out[p.Backends()[i]] = true
	}
	return out
}

// TestSteadyMovesOnlyTheChangedBackend is steady's churn guarantee: a
// client's order over the other backends does not depend on a backend being
// there, so unless the client's block of clients is re-cut, adding a backend
// changes at most one member of its subset (to the added backend) and
// removing one changes only the subsets that had it. With n >= 32*sqrt(k)
// backends before and after, blocks are never re-cut.
func TestSteadyMovesOnlyTheChangedBackend(t *testing.T) {
	for name, tc := range map[string]struct {
		backends, size, clients int
		recutOK                 bool // n < 32*sqrt(k): blocks may be re-cut
	}{
		"300 backends, size 10":    {backends: 300, size: 10, clients: 300},
		"200 backends, size 20":    {backends: 200, size: 20, clients: 1000},
		"102 backends, size 10":    {backends: 102, size: 10, clients: 640},
		"12 backends, size 11":     {backends: 12, size: 11, clients: 100, recutOK: true},
		"30 backends, size 4":      {backends: 30, size: 4, clients: 500, recutOK: true},
		"5 backends, size 5 (all)": {backends: 5, size: 5, clients: 70, recutOK: true},
	} {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(tc.backends), uint64(tc.size)))
			all := randomIDs(r, tc.backends+1)
			added, base := all[0], all[1:]
			removedID := base[r.IntN(len(base))]
			before := mustNew(t, Steady, base, tc.size)
			after := mustNew(t, Steady, all, tc.size)
			removed := mustNew(t, Steady, slices.DeleteFunc(slices.Clone(base), func(s string) bool { return s == removedID }), tc.size)
			for c := range tc.clients {
				if !tc.recutOK && (!sameBlock(before, after, c) || !sameBlock(before, removed, c)) {
					t.Fatalf("client %d: block re-cut with %d backends, size %d", c, tc.backends, tc.size)
				}
				checkOneChange(t, before, after, c, added, "")
				checkOneChange(t, before, removed, c, "", removedID)
			}
		})
	}
}

// checkOneChange checks client c between two steady plans whose backend
// sets differ by added or by removed: if c's block is the same in both, at
// most one member changed, and only to added or from removed.
func checkOneChange(t *testing.T, before, after Plan, c int, added, removed string) {
	t.Helper()
	b, a := subsetIDs(before, c), subsetIDs(after, c)
	if len(a) != after.Size() {
		t.Fatalf("client %d: subset of %d, want %d", c, len(a), after.Size())
	}
	if !sameBlock(before, after, c) {
		return
	}
	gone := diff(b, a)
	switch {
	case len(gone) > 1:
		t.Fatalf("client %d: %v left its subset", c, gone)
	case len(gone) == 1 && added != "" && !a[added]:
		t.Fatalf("client %d: adding %s replaced %v by something else", c, added, gone)
	case len(gone) == 1 && added == "" && gone[0] != removed:
		t.Fatalf("client %d: removing %s took %v", c, removed, gone)
	}
}

// sameBlock reports whether client c has the same block of clients (and so
// the same ring) in two steady plans.
func sameBlock(p, q Plan, c int) bool {
	return p.(*steadyPlan).ringOf(uint64(c)) == q.(*steadyPlan).ringOf(uint64(c)) &&
		blockBits(p.(*steadyPlan), c) == blockBits(q.(*steadyPlan), c)
}

// blockBits returns the size of client c's block as a shift.
func blockBits(p *steadyPlan, c int) int {
	first := p.ringOf(uint64(c))
	for level := maxBlockBits; level > 0; level-- {
		if uint64(c)>>level<<level == first && p.ringOf(first+(1<<level)-1) == first {
			return level
		}
	}
	return 0
}

func TestSteadyBlocks(t *testing.T) {
	for name, tc := range map[string]struct {
		backends, size int
		minBits        int // smallest block size seen, as a shift
	}{
		"n >= 32*sqrt(k): always 32": {backends: 300, size: 10, minBits: 5},
		"n = 32*sqrt(k) exactly":     {backends: 128, size: 16, minBits: 5},
		"small n/k: smaller blocks":  {backends: 7, size: 2, minBits: 2},
		"k = n: blocks of n/sqrt(n)": {backends: 16, size: 16, minBits: 2},
	} {
		t.Run(name, func(t *testing.T) {
			p := mustNew(t, Steady, names("s", tc.backends), tc.size).(*steadyPlan)
			lo := maxBlockBits
			for c := 0; c < 4096; c++ {
				lo = min(lo, blockBits(p, c))
			}
			if lo != tc.minBits {
				t.Errorf("smallest block 2^%d clients, want 2^%d", lo, tc.minBits)
			}
		})
	}
}

// TestSteadyClientIndependence: a client's order is the same whatever
// other clients were asked, in any order and concurrently.
func TestSteadyClientIndependence(t *testing.T) {
	ids := randomIDs(rand.New(rand.NewPCG(1, 2)), 97)
	ref := mustNew(t, Steady, ids, 7)
	want := make([][]int, 200)
	for c := range want {
		want[c] = ref.Order(nil, c, 97)
	}
	p := mustNew(t, Steady, ids, 7)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range want {
				c := (i*7 + g*31) % len(want)
				if got := p.Order(nil, c, 97); !slices.Equal(got, want[c]) {
					t.Errorf("client %d: order %v, want %v", c, got, want[c])
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestSteadyBalance(t *testing.T) {
	// Bounds are well above the medians the simulator reports (see
	// BENCHMARKS.md) so that they catch regressions, not noise.
	for name, tc := range map[string]struct {
		backends, size, clients int
		maxOverMean             float64
	}{
		"300 clients x 300 backends x 10":  {300, 10, 300, 1.9},
		"1000 clients x 200 backends x 20": {200, 20, 1000, 1.25},
		"3000 clients x 100 backends x 5":  {100, 5, 3000, 1.2},
	} {
		t.Run(name, func(t *testing.T) {
			p := mustNew(t, Steady, randomIDs(rand.New(rand.NewPCG(7, uint64(tc.backends))), tc.backends), tc.size)
			loads := Loads(p, tc.clients)
			mean := float64(tc.clients*tc.size) / float64(tc.backends)
			if got := float64(slices.Max(loads)) / mean; got > tc.maxOverMean {
				t.Errorf("max/mean = %.3f, want <= %.2f", got, tc.maxOverMean)
			}
		})
	}
}

func TestSteadyAllBackendsWhenSizeCoversThem(t *testing.T) {
	p := mustNew(t, Steady, []string{"c", "a", "b", "a"}, 9)
	if p.Size() != 3 {
		t.Fatalf("Size() = %d, want 3", p.Size())
	}
	for c := range 50 {
		got := slices.Sorted(slices.Values(p.Order(nil, c, 9)))
		if !slices.Equal(got, []int{0, 1, 2}) {
			t.Fatalf("client %d: %v, want every backend once", c, got)
		}
	}
}

func mustNew(t testing.TB, alg Algorithm, ids []string, size int) Plan {
	t.Helper()
	p, err := New(alg, ids, size)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// diff returns the members of a missing from b, sorted.
func diff(a, b map[string]bool) []string {
	var out []string
	for id := range a {
		if !b[id] {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}
