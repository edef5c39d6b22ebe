package subsetting

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkPlan10000x1000 is the design guide's target (§6): New plus the
// subset of every client, 10,000 clients x 1,000 backends, size 20, caches
// cold (a new plan per op). One op must stay under 100 ms.
func BenchmarkPlan10000x1000(b *testing.B) {
	ids := randomIDs(rand.New(rand.NewPCG(1, 2)), 1000)
	for _, alg := range []Algorithm{Classic, Steady, Random} {
		b.Run(string(alg), func(b *testing.B) {
			dst := make([]int, 0, 20)
			for b.Loop() {
				p, err := New(alg, ids, 20)
				if err != nil {
					b.Fatal(err)
				}
				for c := range 10000 {
					dst = p.Order(dst[:0], c, 20)
				}
			}
		})
	}
}

// BenchmarkOrder is one client's subset from a warm plan, the cost per node
// once the plan's rings or rounds are built.
func BenchmarkOrder(b *testing.B) {
	ids := randomIDs(rand.New(rand.NewPCG(1, 2)), 1000)
	for _, alg := range []Algorithm{Classic, Steady} {
		b.Run(string(alg), func(b *testing.B) {
			p, err := New(alg, ids, 20)
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]int, 0, 20)
			for c := range 1024 {
				dst = p.Order(dst[:0], c, 20)
			}
			c := 0
			for b.Loop() {
				dst = p.Order(dst[:0], c&1023, 20)
				c++
			}
		})
	}
}
