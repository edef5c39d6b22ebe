package subsetting

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The fuzz targets run their seed corpus as ordinary tests; explore with
// e.g. go test ./subsetting -run '^$' -fuzz FuzzOrder -fuzztime 30s.

// fuzzConfig turns fuzz inputs into a small plan configuration.
func fuzzConfig(seed uint64, backends uint16, size uint8) (ids []string, k int) {
	return randomIDs(rand.New(rand.NewPCG(seed, 1)), int(backends%300)), int(size%40) + 1
}

// FuzzOrder: for every algorithm, a subset is Size() distinct indices, an
// order is prefix consistent and a permutation, and the plan is the same
// for any input order with duplicates (determinism, order independence).
func FuzzOrder(f *testing.F) {
	f.Add(uint8(0), uint64(1), uint16(12), uint8(2), uint32(0))
	f.Add(uint8(1), uint64(2), uint16(300), uint8(9), uint32(299))
	f.Add(uint8(1), uint64(3), uint16(1), uint8(0), uint32(5))
	f.Add(uint8(0), uint64(4), uint16(10), uint8(2), uint32(1<<30))
	f.Add(uint8(2), uint64(5), uint16(40), uint8(39), uint32(77))
	f.Fuzz(func(t *testing.T, alg uint8, seed uint64, backends uint16, size uint8, client uint32) {
		ids, k := fuzzConfig(seed, backends, size)
		a := algorithms[int(alg)%len(algorithms)]
		p := mustNew(t, a, ids, k)
		if want := min(k, len(p.Backends())); p.Size() != want {
			t.Fatalf("Size() = %d, want %d", p.Size(), want)
		}
		dup := slices.Concat(ids, ids[:len(ids)/3])
		rand.New(rand.NewPCG(seed, 2)).Shuffle(len(dup), func(i, j int) { dup[i], dup[j] = dup[j], dup[i] })
		checkOrder(t, p, mustNew(t, a, dup, k), int(client))
	})
}

// FuzzSteadyChurn: unless the client's block of clients is re-cut (never
// with n >= 32*sqrt(k)), adding or removing one backend changes at most one
// member of a steady subset, and only to or from that backend.
func FuzzSteadyChurn(f *testing.F) {
	f.Add(uint64(1), uint16(30), uint8(4), uint32(0), uint16(3))
	f.Add(uint64(2), uint16(299), uint8(9), uint32(1000), uint16(150))
	f.Add(uint64(3), uint16(2), uint8(1), uint32(31), uint16(0))
	f.Add(uint64(4), uint16(160), uint8(19), uint32(77), uint16(9))
	f.Fuzz(func(t *testing.T, seed uint64, backends uint16, size uint8, client uint32, victim uint16) {
		ids, k := fuzzConfig(seed, backends, size)
		if len(ids) < 2 {
			return
		}
		c := int(client % 100000)
		base := ids[1:]
		w := base[int(victim)%len(base)]
		without := slices.DeleteFunc(slices.Clone(base), func(s string) bool { return s == w })
		before := mustNew(t, Steady, base, k)
		checkOneChange(t, before, mustNew(t, Steady, ids, k), c, ids[0], "")
		checkOneChange(t, before, mustNew(t, Steady, without, k), c, "", w)
	})
}

// FuzzSteadyBalance: loads add up to clients*size, no backend is in more
// subsets than there are clients, and with enough connections per backend
// (mean >= 30) none has more than twice the mean. TestSteadyBalance holds
// the tight bounds for the configurations of the design guide.
func FuzzSteadyBalance(f *testing.F) {
	f.Add(uint64(1), uint16(300), uint8(9), uint16(300))
	f.Add(uint64(2), uint16(200), uint8(19), uint16(1000))
	f.Add(uint64(3), uint16(2), uint8(0), uint16(100))
	f.Add(uint64(4), uint16(50), uint8(30), uint16(17))
	f.Fuzz(func(t *testing.T, seed uint64, backends uint16, size uint8, clients uint16) {
		ids, k := fuzzConfig(seed, backends, size)
		if len(ids) == 0 {
			return
		}
		n := int(clients % 3000)
		p := mustNew(t, Steady, ids, k)
		loads := Loads(p, n)
		sum := 0
		for _, l := range loads {
			sum += l
		}
		if sum != n*p.Size() || slices.Max(loads) > n {
			t.Fatalf("loads %v: sum %d (want %d), max %d (clients %d)", loads, sum, n*p.Size(), slices.Max(loads), n)
		}
		mean := float64(sum) / float64(len(loads))
		if mean >= 30 && float64(slices.Max(loads)) > 2*mean {
			t.Fatalf("max load %d is more than twice the mean %.1f", slices.Max(loads), mean)
		}
	})
}
