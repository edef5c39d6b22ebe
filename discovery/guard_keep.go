package discovery

import (
	"slices"
	"strings"
	"time"
)

// apply applies the offered snapshot at now, with the removed instances
// of the services still held kept; the services in expired had their
// hold end at their deadline and start their window afresh.
func (g *RemovalGuard) apply(v Verdict, now time.Time, expired []string) Verdict {
	out := g.merge(g.offered)
	g.base, g.total = instances(out)
	for _, name := range expired {
		delete(g.peaks, name)
	}
	cutoff := now.Add(-g.window)
	for name, q := range g.peaks {
		if _, held := g.held[name]; held {
			continue
		}
		if _, ok := g.base[name]; !ok {
			q.push(now, 0)
		}
		if q.max(cutoff) == 0 {
			delete(g.peaks, name)
		}
	}
	for name, ids := range g.base {
		if _, held := g.held[name]; held {
			continue // not applied in full: its count is not a peak
		}
		q := g.peaks[name]
		if q == nil {
			q = &peakQueue{}
			g.peaks[name] = q
		}
		q.push(now, len(ids))
	}
	g.applied = true
	v.Apply, v.Snapshot, v.Next = true, out, g.next()
	return v
}

// merge returns s with the instances that each held service had in the
// last applied snapshot and lacks in s put back, as they were; s itself
// is not modified.
func (g *RemovalGuard) merge(s Snapshot) Snapshot {
	if len(g.held) == 0 {
		return s
	}
	out := Snapshot{Services: make([]Service, 0, len(s.Services)+len(g.held))}
	seen := make(map[string]bool, len(g.held))
	for _, svc := range s.Services {
		if _, held := g.held[svc.Name]; held && !seen[svc.Name] {
			seen[svc.Name] = true
			svc = g.keep(svc)
		}
		out.Services = append(out.Services, svc)
	}
	for name := range g.held {
		if !seen[name] {
			out.Services = append(out.Services, g.keep(Service{Name: name}))
		}
	}
	slices.SortStableFunc(out.Services, func(a, b Service) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// keep returns svc with the instances of the last applied snapshot that
// it lacks added, sorted by ID.
func (g *RemovalGuard) keep(svc Service) Service {
	have := make(map[string]bool, len(svc.Endpoints))
	for _, ep := range svc.Endpoints {
		have[ep.ID] = true
	}
	eps := make([]Endpoint, 0, len(svc.Endpoints)+len(g.base[svc.Name]))
	eps = append(eps, svc.Endpoints...)
	for id, ep := range g.base[svc.Name] {
		if !have[id] {
			eps = append(eps, ep)
		}
	}
	slices.SortStableFunc(eps, func(a, b Endpoint) int { return strings.Compare(a.ID, b.ID) })
	return Service{Name: svc.Name, Endpoints: eps}
}

// next is the earliest deadline of the holds in force (while the whole
// update is held, its deadline: the service holds end with it); zero
// when none.
func (g *RemovalGuard) next() time.Time {
	if g.holding {
		return g.until
	}
	var t time.Time
	for _, until := range g.held {
		if t.IsZero() || until.Before(t) {
			t = until
		}
	}
	return t
}

// services lists, sorted, every service of the base, the peaks or have.
func (g *RemovalGuard) services(have map[string]map[string]Endpoint) []string {
	seen := make(map[string]bool, len(have)+len(g.peaks))
	var out []string
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	for name := range g.base {
		add(name)
	}
	for name := range g.peaks {
		add(name)
	}
	for name := range have {
		add(name)
	}
	slices.Sort(out)
	return out
}

// peak is the largest instance count of service name applied in full
// within the window before now (the last such count included).
func (g *RemovalGuard) peak(name string, now time.Time) int {
	q := g.peaks[name]
	if q == nil {
		return len(g.base[name])
	}
	return q.max(now.Add(-g.window))
}

// lost counts the instances of service name in the applied snapshot
// that have (its instances now) lacks.
func (g *RemovalGuard) lost(name string, have map[string]Endpoint) int {
	n := 0
	for id := range g.base[name] {
		if _, ok := have[id]; !ok {
			n++
		}
	}
	return n
}

// peakQueue is a monotonic queue of (time, count): counts strictly
// decrease from front to back, so the front is the largest count pushed
// since the cutoff. The newest entry always stays.
type peakQueue struct {
	at    []time.Time
	count []int
}

// push adds count at time at (not before the last push).
func (q *peakQueue) push(at time.Time, count int) {
	for n := len(q.count); n > 0 && q.count[n-1] <= count; n-- {
		q.at, q.count = q.at[:n-1], q.count[:n-1]
	}
	q.at, q.count = append(q.at, at), append(q.count, count)
}

// max drops the entries pushed before cutoff (but the newest) and returns
// the largest count left.
func (q *peakQueue) max(cutoff time.Time) int {
	i := 0
	for i < len(q.at)-1 && q.at[i].Before(cutoff) {
		i++
	}
	if i > 0 {
		q.at, q.count = slices.Delete(q.at, 0, i), slices.Delete(q.count, 0, i)
	}
	if len(q.count) == 0 {
		return 0
	}
	return q.count[0]
}

// instances indexes the (service, endpoint ID) pairs of s, and counts
// them; for a repeated pair the first endpoint counts.
func instances(s Snapshot) (map[string]map[string]Endpoint, int) {
	out := make(map[string]map[string]Endpoint, len(s.Services))
	n := 0
	for _, svc := range s.Services {
		ids := out[svc.Name]
		if ids == nil {
			ids = make(map[string]Endpoint, len(svc.Endpoints))
			out[svc.Name] = ids
		}
		for _, ep := range svc.Endpoints {
			if _, ok := ids[ep.ID]; !ok {
				ids[ep.ID] = ep
				n++
			}
		}
	}
	return out, n
}
