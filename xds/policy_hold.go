package xds

import (
	"slices"
	"strings"
	"time"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/translate"
)

// policyHold is how long a split target's change of serving state waits
// on one side, so that clients, which apply routes and endpoints as they
// arrive (grpc-go in any order), never route to a target that cannot
// serve. When a target stops serving, routes move its share off at once
// while its load assignment keeps its last serving endpoints for
// policyHold; when it serves again, its load assignment says so at once
// while routes give it its share back after policyHold.
const policyHold = 2 * time.Second

// holdState is the serving state of split targets as routes see it.
type holdState struct {
	targets map[string]*heldTarget
	seen    map[string]bool // targets asked about in this pass
}

type heldTarget struct {
	serving bool              // as it serves (not as routes see it)
	since   time.Time         // when it last changed; zero: before any history
	last    discovery.Service // its endpoints when it last served
}

// begin starts a pass.
func (h *holdState) begin() {
	if h.targets == nil {
		h.targets = map[string]*heldTarget{}
	}
	h.seen = map[string]bool{}
}

// routeServing is translate.ExpandInput.RouteServing at now.
func (h *holdState) routeServing(now time.Time) func(string, bool) bool {
	return func(cluster string, serving bool) bool {
		h.seen[cluster] = true
		t, ok := h.targets[cluster]
		if !ok {
			h.targets[cluster] = &heldTarget{serving: serving}
			return serving
		}
		if t.serving != serving {
			t.serving, t.since = serving, now
		}
		return serving && !h.recent(t, now)
	}
}

func (h *holdState) recent(t *heldTarget, now time.Time) bool {
	return !t.since.IsZero() && now.Sub(t.since) < policyHold
}

// end serves each target that stopped serving less than policyHold ago
// with its last serving endpoints, records the serving ones', forgets the
// targets no route asked about, and returns when the next hold ends
// (zero: none pending).
func (h *holdState) end(exp *translate.Expansion, now time.Time) time.Time {
	var next time.Time
	for name, t := range h.targets {
		if !h.seen[name] {
			delete(h.targets, name)
			continue
		}
		i, ok := slices.BinarySearchFunc(exp.Snapshot.Services, name, func(s discovery.Service, n string) int { return strings.Compare(s.Name, n) })
		switch {
		case !ok:
		case t.serving:
			t.last = exp.Snapshot.Services[i]
		case h.recent(t, now) && t.last.Name == name:
			exp.Snapshot.Services[i] = t.last
		}
		if h.recent(t, now) && (next.IsZero() || t.since.Add(policyHold).Before(next)) {
			next = t.since.Add(policyHold)
		}
	}
	return next
}
