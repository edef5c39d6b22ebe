package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/xds-server/xds-server/subsetting"
)

// config is one simulated deployment.
type config struct {
	clients, backends, size int
}

func (c config) String() string {
	return fmt.Sprintf("%d clients x %d backends x size %d", c.clients, c.backends, c.size)
}

// Churn events, in table order.
var events = []string{"+1 backend", "-1 backend", "+1 client", "-1 client"}

// maker builds a plan; the reference algorithm also needs the client count.
type maker struct {
	name string
	make func(ids []string, size, clients int) (subsetting.Plan, error)
}

func algorithm(a subsetting.Algorithm) maker {
	return maker{name: string(a), make: func(ids []string, size, _ int) (subsetting.Plan, error) {
		return subsetting.New(a, ids, size)
	}}
}

var referenceMaker = maker{name: "bounded-load rendezvous (reference, not shipped)", make: newBoundedLoad}

// hashRingsName is steady without endpoint slots: what xds falls back on
// when slots cannot be had.
const hashRingsName = "steady without slots (hash rings)"

// slottedMaker is steady as xds serves it: Ringsteady over endpoint slots
// that stick to ids, as the xds slot table gives them. A call whose ids
// are all unknown starts a new trial: its ids take slots 0..n-1 in the
// order given (their arrival order). Later calls of the trial keep every
// known id's slot; a new id takes the lowest slot no id of the trial ever
// held (a removed backend's slot stays reserved, as within the index TTL).
func slottedMaker() maker {
	slots := map[string]int{}
	return maker{name: string(subsetting.Steady), make: func(ids []string, size, _ int) (subsetting.Plan, error) {
		if !slices.ContainsFunc(ids, func(id string) bool { _, ok := slots[id]; return ok }) {
			clear(slots)
		}
		cur := make(map[string]int, len(ids))
		for _, id := range ids {
			s, ok := slots[id]
			if !ok {
				s = len(slots)
				slots[id] = s
			}
			cur[id] = s
		}
		return subsetting.NewSlotted(cur, size)
	}}
}

// algStats are one algorithm's figures, one entry per trial.
type algStats struct {
	name                 string
	min, mean, max, load []float64 // connections per backend; load = max/mean
	churn                map[string][]float64
}

// configResult is one configuration's figures.
type configResult struct {
	cfg  config
	algs []algStats
}

// simulateConfig runs trials of every algorithm on cfg. Each trial draws
// fresh random backend ids; every algorithm sees the same ids.
func simulateConfig(cfg config, trials int, seed uint64, reference bool) configResult {
	hashRings := algorithm(subsetting.Steady)
	hashRings.name = hashRingsName
	makers := []maker{algorithm(subsetting.Classic), slottedMaker(), hashRings, algorithm(subsetting.Random)}
	if reference {
		makers = append(makers, referenceMaker)
	}
	out := configResult{cfg: cfg}
	for _, m := range makers {
		st := algStats{name: m.name, churn: map[string][]float64{}}
		r := rand.New(rand.NewPCG(seed, uint64(cfg.clients)<<32|uint64(cfg.backends)<<8|uint64(cfg.size)))
		for range trials {
			trial(&st, m, cfg, r)
		}
		out.algs = append(out.algs, st)
	}
	return out
}

// trial measures one set of random backend ids: balance over the clients,
// then churn for one backend added, one removed, one client added (it takes
// the next index) and one removed (a random index is freed; the others keep
// theirs, as the xds registry's sticky indices do).
func trial(st *algStats, m maker, cfg config, r *rand.Rand) {
	ids := randomIDs(r, cfg.backends+1)
	extra, ids := ids[0], ids[1:]
	base := must(m.make(ids, cfg.size, cfg.clients+1))
	loads := subsetting.Loads(base, cfg.clients)
	mean := float64(cfg.clients*base.Size()) / float64(len(loads))
	st.min = append(st.min, float64(slices.Min(loads)))
	st.mean = append(st.mean, mean)
	st.max = append(st.max, float64(slices.Max(loads)))
	st.load = append(st.load, float64(slices.Max(loads))/mean)

	everyone := seq(cfg.clients)
	added := must(m.make(append(slices.Clone(ids), extra), cfg.size, cfg.clients))
	victim := r.IntN(len(ids))
	removed := must(m.make(slices.Delete(slices.Clone(ids), victim, victim+1), cfg.size, cfg.clients))
	st.churn["+1 backend"] = append(st.churn["+1 backend"], fraction(subsetting.Churn(base, added, everyone)))
	st.churn["-1 backend"] = append(st.churn["-1 backend"], fraction(subsetting.Churn(base, removed, everyone)))

	// A fresh plan for the new client count, asked in another order, must
	// give the clients that stay what they had.
	more := must(m.make(ids, cfg.size, cfg.clients+1))
	more.Order(nil, cfg.clients, more.Size())
	st.churn["+1 client"] = append(st.churn["+1 client"], fraction(subsetting.Churn(base, more, reversed(everyone))))
	gone := r.IntN(cfg.clients)
	stay := slices.Delete(slices.Clone(everyone), gone, gone+1)
	fewer := must(m.make(ids, cfg.size, cfg.clients+1))
	st.churn["-1 client"] = append(st.churn["-1 client"], fraction(subsetting.Churn(base, fewer, reversed(stay))))
}

// timing is the time to compute every subset of one large configuration.
type timing struct {
	name    string
	runs    []time.Duration
	perCall time.Duration // median run / clients
}

// timingConfig is the design guide's subset computation target.
var timingConfig = config{clients: 10000, backends: 1000, size: 20}

// timeAll times New plus Order for every client, runs times per algorithm.
func timeAll(cfg config, runs int, seed uint64) []timing {
	r := rand.New(rand.NewPCG(seed, 99))
	ids := randomIDs(r, cfg.backends)
	var out []timing
	slots := make(map[string]int, len(ids))
	for i, id := range ids {
		slots[id] = i
	}
	builders := []struct {
		name  string
		build func() (subsetting.Plan, error)
	}{
		{string(subsetting.Classic), func() (subsetting.Plan, error) { return subsetting.New(subsetting.Classic, ids, cfg.size) }},
		{string(subsetting.Steady), func() (subsetting.Plan, error) { return subsetting.NewSlotted(slots, cfg.size) }},
		{hashRingsName, func() (subsetting.Plan, error) { return subsetting.New(subsetting.Steady, ids, cfg.size) }},
		{string(subsetting.Random), func() (subsetting.Plan, error) { return subsetting.New(subsetting.Random, ids, cfg.size) }},
	}
	for _, b := range builders {
		t := timing{name: b.name}
		dst := make([]int, 0, cfg.size)
		for range runs {
			start := time.Now()
			p := must(b.build())
			for c := range cfg.clients {
				dst = p.Order(dst[:0], c, cfg.size)
			}
			t.runs = append(t.runs, time.Since(start))
		}
		t.perCall = medianDuration(t.runs) / time.Duration(cfg.clients)
		out = append(out, t)
	}
	return out
}

// randomIDs returns n distinct random ids shaped like Consul service ids, so
// that an added or removed backend lands at a random sort position.
func randomIDs(r *rand.Rand, n int) []string {
	seen := make(map[string]bool, n)
	out := make([]string, 0, n)
	for len(out) < n {
		id := fmt.Sprintf("api-%08x-%04x-%04x", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xffff)
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

func fraction(moved, total int) float64 {
	if total == 0 {
		return 0
	}
	return float64(moved) / float64(total)
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func reversed(xs []int) []int {
	out := slices.Clone(xs)
	slices.Reverse(out)
	return out
}

// must panics on a plan error: the simulator only builds valid plans.
func must(p subsetting.Plan, err error) subsetting.Plan {
	if err != nil {
		panic(err)
	}
	return p
}
