package subsetting

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// denseSlots gives n backends with random ids the slots 0..n-1.
func denseSlots(rng *rand.Rand, n int) map[string]int {
	out := make(map[string]int, n)
	for s := range n {
		out[fmt.Sprintf("api-%016x", rng.Uint64())] = s
	}
	return out
}

func maxOverMean(loads []int) float64 {
	sum := 0
	for _, l := range loads {
		sum += l
	}
	return float64(slices.Max(loads)) / (float64(sum) / float64(len(loads)))
}

func TestSlottedBalance(t *testing.T) {
	for name, tc := range map[string]struct {
		clients, backends, size int
		want                    float64 // max/mean bound
	}{
		"300 x 300 x 10 is exact":  {300, 300, 10, 1.0},
		"1000 x 200 x 20":          {1000, 200, 20, 1.05},
		"10000 x 1000 x 20":        {10000, 1000, 20, 1.05},
		"3000 x 1000 x 20":         {3000, 1000, 20, 1.05},
		"clients = backends = 2^k": {256, 256, 7, 1.0},
		"1000 x 300 x 10 (uneven)": {1000, 300, 10, 1.1},
		"100 x 300 x 10 (sparse)":  {100, 300, 10, 1.2}, // mean 3.33: 4 is the least possible max
	} {
		t.Run(name, func(t *testing.T) {
			p, err := NewSlotted(denseSlots(rand.New(rand.NewPCG(1, 2)), tc.backends), tc.size)
			if err != nil {
				t.Fatal(err)
			}
			if got := maxOverMean(Loads(p, tc.clients)); got > tc.want+1e-9 {
				t.Errorf("max/mean = %.3f, want <= %.3f", got, tc.want)
			}
		})
	}
}

func TestSlottedChurn(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	slots := denseSlots(rng, 300)
	before, _ := NewSlotted(slots, 10)
	clients := make([]int, 300)
	for i := range clients {
		clients[i] = i
	}
	// One backend joins in the next free slot; one leaves, freeing its own.
	added := copyMap(slots)
	added["api-new"] = 300
	removed := copyMap(slots)
	for id, s := range removed {
		if s == 137 {
			delete(removed, id)
		}
	}
	for name, after := range map[string]map[string]int{"+1 backend": added, "-1 backend": removed} {
		p, err := NewSlotted(after, 10)
		if err != nil {
			t.Fatal(err)
		}
		moved, total := Churn(before, p, clients)
		if bound := 2 * total / 300; moved > bound {
			t.Errorf("%s: %d of %d connections moved, want <= 2/n = %d", name, moved, total, bound)
		}
	}
}

func copyMap(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestSlottedPlan(t *testing.T) {
	p, err := NewSlotted(map[string]int{"c": 2, "a": 0, "b": 1, "d": 3}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Backends(), []string{"a", "b", "c", "d"}) || p.Size() != 2 {
		t.Fatalf("backends %v, size %d", p.Backends(), p.Size())
	}
	// Ring positions: slot 0 at 0, 2 at 1/4, 1 at 1/2, 3 at 3/4; clients alike.
	for client, want := range map[int][]int{0: {0, 2, 1, 3}, 1: {1, 3, 0, 2}, 2: {2, 1, 3, 0}, 3: {3, 0, 2, 1}} {
		if got := p.Order(nil, client, 4); !slices.Equal(got, want) {
			t.Errorf("client %d: order %v, want %v", client, got, want)
		}
		if got := p.Order(nil, client, 9); len(got) != 4 {
			t.Errorf("client %d: n beyond the backends: %v", client, got)
		}
	}
	if got := p.Order([]int{7}, -1, 2); !slices.Equal(got, []int{7}) {
		t.Errorf("negative client appended %v", got)
	}
	for name, tc := range map[string]struct {
		slots map[string]int
		size  int
	}{
		"shared slot":   {map[string]int{"a": 1, "b": 1}, 1},
		"negative slot": {map[string]int{"a": -1}, 1},
		"size 0":        {map[string]int{"a": 0}, 0},
	} {
		if _, err := NewSlotted(tc.slots, tc.size); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

// FuzzSlotted: over random slot tables (with holes), a slotted plan's
// subsets have Size() distinct members, orders are prefix-consistent, and
// one backend joining a free slot or leaving changes at most one member of
// any client's subset, only to or from that backend.
func FuzzSlotted(f *testing.F) {
	f.Add(uint64(1), uint16(300), uint8(9), uint32(0), uint16(7))
	f.Add(uint64(2), uint16(9), uint8(2), uint32(2), uint16(0))
	f.Add(uint64(3), uint16(2), uint8(0), uint32(1<<20), uint16(1))
	f.Fuzz(func(t *testing.T, seed uint64, backends uint16, size uint8, client uint32, victim uint16) {
		n := int(backends%2000) + 2
		k := int(size%40) + 1
		rng := rand.New(rand.NewPCG(seed, 7))
		slots := map[string]int{}
		for _, s := range rng.Perm(n + n/3)[:n] { // slots with holes
			slots[fmt.Sprintf("b-%x", rng.Uint64())] = s
		}
		before, err := NewSlotted(slots, k)
		if err != nil {
			t.Fatal(err)
		}
		c := int(client % 100000)
		order := before.Order(nil, c, n)
		if len(order) != n || len(slices.Compact(slices.Sorted(slices.Values(order)))) != n {
			t.Fatalf("client %d: order %v is not a permutation of %d backends", c, order, n)
		}
		if got := before.Order(nil, c, k); !slices.Equal(got, order[:min(k, n)]) {
			t.Fatalf("Order(%d) %v is not a prefix of Order(n) %v", k, got, order)
		}
		w := before.Backends()[int(victim)%n]
		gone := copyMap(slots)
		delete(gone, w)
		joined := copyMap(slots)
		joined["b-new"] = n + n/3 // a free slot
		for _, tc := range []struct {
			slots        map[string]int
			added, taken string
		}{{gone, "", w}, {joined, "b-new", ""}} {
			after, err := NewSlotted(tc.slots, k)
			if err != nil {
				t.Fatal(err)
			}
			checkSlottedChange(t, before, after, c, tc.added, tc.taken)
		}
	})
}

// checkSlottedChange checks one backend joining (added) or leaving
// (removed) the ring: client c's subset loses at most one member and gains
// at most one; a leaving backend is the only one it may lose, a joining
// one the only one it may gain.
func checkSlottedChange(t *testing.T, before, after Plan, c int, added, removed string) {
	t.Helper()
	b, a := subsetIDs(before, c), subsetIDs(after, c)
	if len(a) != after.Size() {
		t.Fatalf("client %d: subset %v has %d members, want %d", c, a, len(a), after.Size())
	}
	var lost, gained []string
	for id := range b {
		if !a[id] {
			lost = append(lost, id)
		}
	}
	for id := range a {
		if !b[id] {
			gained = append(gained, id)
		}
	}
	switch {
	case len(lost) > 1 || len(gained) > 1:
		t.Fatalf("client %d: lost %v, gained %v: want at most one each", c, lost, gained)
	case removed != "" && len(lost) == 1 && lost[0] != removed:
		t.Fatalf("client %d: lost %s, but only %s left", c, lost[0], removed)
	case added != "" && len(gained) == 1 && gained[0] != added:
		t.Fatalf("client %d: gained %s, but only %s joined", c, gained[0], added)
	}
}
