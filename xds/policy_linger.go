package xds

import (
	"slices"
	"strings"
	"time"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/xdscache"
)

// policyLinger is how long a policy's cluster (a target
// "<service>~<subset>" or an aggregate) stays served after its policy
// stopped naming it. Envoy applies a cluster's removal as soon as it
// arrives, and a route change in the same push a moment later: requests
// routed in between would find no cluster (503 NC). Lingering, the
// cluster goes in a later push, once the route moved off it.
const policyLinger = 10 * time.Second

// lingerState is what the reconciler keeps of the policies' clusters.
type lingerState struct {
	last  map[string]discovery.Service // targets served in the latest pass
	aggs  map[string]xdscache.Item     // aggregates served in the latest pass
	gone  map[string]lingerTarget      // targets no longer named, until their time
	goneA map[string]lingerAgg         // aggregates no longer named, until their time
	after func(time.Duration, func())  // schedules a pass (time.AfterFunc)
	timer time.Time                    // when the scheduled pass is due
}

type lingerTarget struct {
	svc   discovery.Service
	until time.Time
}

type lingerAgg struct {
	it    xdscache.Item
	until time.Time
}

// isTarget reports whether a cluster name is a policy target's.
func isTarget(name string) bool { return strings.Contains(name, translate.SubsetSep) }

// apply adds the lingering targets to the expansion's snapshot and the
// lingering aggregates to aggs, records what this pass serves, and
// schedules a pass when the next lingering cluster is due to go.
func (l *lingerState) apply(exp *translate.Expansion, aggs []xdscache.Item, now time.Time, redo func()) []xdscache.Item {
	cur := map[string]discovery.Service{}
	for _, svc := range exp.Snapshot.Services {
		if isTarget(svc.Name) {
			cur[svc.Name] = svc
		}
	}
	curA := make(map[string]xdscache.Item, len(aggs))
	for _, it := range aggs {
		curA[it.Name] = it
	}
	if l.gone == nil {
		l.gone, l.goneA = map[string]lingerTarget{}, map[string]lingerAgg{}
	}
	for name, svc := range l.last {
		if _, ok := cur[name]; !ok {
			l.gone[name] = lingerTarget{svc: svc, until: now.Add(policyLinger)}
		}
	}
	for name, it := range l.aggs {
		if _, ok := curA[name]; !ok {
			l.goneA[name] = lingerAgg{it: it, until: now.Add(policyLinger)}
		}
	}
	l.last, l.aggs = cur, curA
	var next time.Time
	due := func(until time.Time) bool {
		if !now.Before(until) {
			return false
		}
		if next.IsZero() || until.Before(next) {
			next = until
		}
		return true
	}
	added := false
	for name, g := range l.gone {
		if _, back := cur[name]; back || !due(g.until) {
			delete(l.gone, name)
			continue
		}
		exp.Snapshot.Services, added = append(exp.Snapshot.Services, g.svc), true
	}
	if added {
		slices.SortFunc(exp.Snapshot.Services, func(a, b discovery.Service) int { return strings.Compare(a.Name, b.Name) })
	}
	for name, g := range l.goneA {
		if _, back := curA[name]; back || !due(g.until) {
			delete(l.goneA, name)
			continue
		}
		aggs = append(aggs, g.it)
	}
	slices.SortFunc(aggs, func(a, b xdscache.Item) int { return strings.Compare(a.Name, b.Name) })
	if !next.IsZero() && l.after != nil && !next.Equal(l.timer) {
		l.timer = next
		l.after(next.Sub(now), redo)
	}
	return aggs
}
