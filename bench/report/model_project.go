package main

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// modelQuestion is what the model is asked: the fleet to serve and the
// latency budget, and the machine a replica may have. None of it is a
// measured input; it comes from this command's flags.
type modelQuestion struct {
	Nodes       int     // xDS nodes over every replica, e.g. 100,000
	P99         float64 // seconds: a change's p99 budget (Consul change or drain -> every node), e.g. 1
	PushP99     float64 // seconds: a full push's p99 budget (every service changes at once), e.g. 1.2
	MinReplicas int     // at least this many replicas (high availability), e.g. 3
	MaxCores    int     // cores a replica may have, e.g. 16
	MaxMemory   float64 // bytes of peak RSS a replica may have
}

// Validate reports every field error.
func (q modelQuestion) Validate() error {
	var errs []error
	if q.Nodes < 1 {
		errs = append(errs, fmt.Errorf("nodes %d, want >= 1", q.Nodes))
	}
	if q.P99 <= 0 || q.PushP99 <= 0 {
		errs = append(errs, fmt.Errorf("p99 %v s and full push p99 %v s, want > 0", q.P99, q.PushP99))
	}
	if q.MinReplicas < 1 || q.MaxCores < 1 {
		errs = append(errs, fmt.Errorf("min replicas %d and max cores %d, want >= 1", q.MinReplicas, q.MaxCores))
	}
	if q.MaxMemory <= 0 {
		errs = append(errs, fmt.Errorf("max memory %v, want > 0", q.MaxMemory))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("report: model question: %w", err)
	}
	return nil
}

// sizing is the model's projection for one replica count.
type sizing struct {
	replicas, nodes        int     // nodes per replica
	changeCores, pushCores float64 // cores a replica needs for each p99 (+Inf: the fixed part alone exceeds it)
	cores                  int     // per replica: the larger, rounded up, at least 1
	memory, peak           float64 // bytes per replica: RSS after sync, peak RSS
	changeReads, pushReads float64 // Consul blocking queries over every replica, per change and per full push
	fits                   bool    // within MaxCores and MaxMemory
	changeAtMax, pushAtMax float64 // seconds: the p99s projected at the replica's cores
}

// coresFor is the cores a replica of n nodes needs for a p99 of budget
// seconds: p99 = lat.a + n x cpu.b / (e x cores), with e the fan-out's
// measured efficiency (at most 1); +Inf when lat.a >= budget.
func (m costModel) coresFor(cpu, lat fit, n, budget float64) float64 {
	if lat.a >= budget {
		return math.Inf(1)
	}
	return n * max(cpu.b, 0) / (min(m.efficiency(cpu, lat), 1) * (budget - lat.a))
}

// p99At is the p99 projected for a replica of n nodes with cores cores.
func (m costModel) p99At(cpu, lat fit, n, cores float64) float64 {
	return lat.a + n*max(cpu.b, 0)/(min(m.efficiency(cpu, lat), 1)*cores)
}

// project sizes the fleet of q at each replica count from q.MinReplicas.
func (m costModel) project(q modelQuestion, replicas []int) []sizing {
	out := make([]sizing, 0, len(replicas))
	for _, r := range replicas {
		n := (q.Nodes + r - 1) / r
		fn := float64(n)
		s := sizing{replicas: r, nodes: n,
			changeCores: m.coresFor(m.changeCPU, m.changeP99, fn, q.P99), pushCores: m.coresFor(m.pushCPU, m.pushP99, fn, q.PushP99),
			memory: m.rssCatalog + m.rssNodes.at(fn), peak: m.rssPeak.at(fn),
			changeReads: float64(r) * m.changeRead.at(fn), pushReads: float64(r) * m.pushRead.at(fn)}
		need := max(s.changeCores, s.pushCores, 1)
		if math.IsInf(need, 1) || need > float64(q.MaxCores) {
			s.cores = q.MaxCores
		} else {
			s.cores = int(math.Ceil(need))
			s.fits = s.peak <= q.MaxMemory
		}
		s.changeAtMax = m.p99At(m.changeCPU, m.changeP99, fn, float64(s.cores))
		s.pushAtMax = m.p99At(m.pushCPU, m.pushP99, fn, float64(s.cores))
		out = append(out, s)
	}
	return out
}

// answer is the sizing that fits with the fewest cores over every
// replica (fewer replicas on a tie); ok is false when none fits.
func answer(ss []sizing) (sizing, bool) {
	var fit []sizing
	for _, s := range ss {
		if s.fits {
			fit = append(fit, s)
		}
	}
	if len(fit) == 0 {
		return sizing{}, false
	}
	return slices.MinFunc(fit, func(a, b sizing) int {
		return cmp.Or(cmp.Compare(a.replicas*a.cores, b.replicas*b.cores), cmp.Compare(a.replicas, b.replicas))
	}), true
}

// replicaCounts are the replica counts the model is projected at: from
// min up, each count the next that divides the fleet differently.
func replicaCounts(min int) []int {
	var out []int
	for _, r := range []int{1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 25, 32, 40, 50} {
		if r >= min {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		out = append(out, min)
	}
	return out
}

// assumption is one assumption of the projection and how far the answer
// stretches it past what was measured (1: not at all).
type assumption struct {
	text    string
	stretch float64
}

// assumptions lists the projection's assumptions at sizing s, the most
// stretched first: the one that breaks first.
func (m costModel) assumptions(q modelQuestion, s sizing) []assumption {
	maxNodes := m.points[len(m.points)-1].nodes
	out := []assumption{
		{fmt.Sprintf("CPU, bytes and memory per node stay linear in nodes (fitted up to %.0f nodes, used at %d per replica)", maxNodes, s.nodes),
			float64(s.nodes) / maxNodes},
		{fmt.Sprintf("the fan-out of a change or a full push spreads over %d cores per replica with the efficiency measured on %.0f shared cores "+
			"(no serial section: the node registry's fleet-wide mutex and the one reconcile loop would cap it)", s.cores, m.machine),
			float64(s.cores) / m.machine},
		{fmt.Sprintf("one Consul serves %d replicas' blocking queries as it serves one (measured with one replica)", s.replicas),
			float64(s.replicas)},
		{fmt.Sprintf("the fixed part (Consul's blocking query, debounce, translate: %s of a change's %s budget, %s of a full push's %s) does not grow with nodes",
			secs(m.changeP99.a), secs(q.P99), secs(m.pushP99.a), secs(q.PushP99)), 1},
	}
	slices.SortStableFunc(out, func(a, b assumption) int { return cmp.Compare(b.stretch, a.stretch) })
	return out
}
