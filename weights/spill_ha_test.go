package weights

import (
	"sync"
	"testing"
	"time"

	"github.com/xds-server/xds-server/discovery"
)

// sharedSummaries is one store of every replica's latest summary.
type sharedSummaries struct {
	mu   sync.Mutex
	sums map[string]Summary
}

// replicaExchange is one replica's view of the shared summaries, with its
// own table exchange.
type replicaExchange struct {
	*fakeExchange
	shared *sharedSummaries
}

func (r replicaExchange) PublishSummary(s Summary) {
	r.shared.mu.Lock()
	defer r.shared.mu.Unlock()
	r.shared.sums[s.Replica] = s
}

func (r replicaExchange) Summaries() []Summary {
	r.shared.mu.Lock()
	defer r.shared.mu.Unlock()
	var out []Summary
	for _, s := range r.shared.sums {
		out = append(out, s)
	}
	return out
}

// With HA, each replica computes the spill from the merged table: r1
// receives zone a's reports, r2 zone b's, and both see both zones and
// spill zone a alike; the leader (r1) and the follower (r2) publish the
// same states.
func TestSpillHAFromTheMergedTable(t *testing.T) {
	shared := &sharedSummaries{sums: map[string]Summary{}}
	var ps [2]*Pipeline
	var recs [2]*spillRecorder
	for i, name := range []string{"r1", "r2"} {
		ex := replicaExchange{&fakeExchange{leader: i == 0}, shared}
		ps[i], recs[i], _ = newSpillPipeline(t, &HAConfig{Replica: name, Summaries: ex, Tables: ex})
		ps[i].Observe(spillSnapshot(discovery.HealthHealthy, true))
	}
	now := t0
	for s := range 20 {
		for _, id := range []string{"a1", "a2"} { // zone a at 0.99, reported to r1 only
			reportLoad(t, ps[0], id, 90, 0.99, now)
		}
		for _, id := range []string{"b1", "b2"} { // zone b at 0.2, reported to r2 only
			reportLoad(t, ps[1], id, 100, 0.2, now)
		}
		for _, p := range ps {
			p.Step(now)
		}
		if s == 0 { // the summaries of the first step reach the other replica at the next
			for _, p := range ps {
				p.Step(now)
			}
		}
		now = now.Add(time.Second)
	}
	for i, rec := range recs {
		if rec.calls() < 2 {
			t.Fatalf("r%d published %d spill states, want zones appearing and a move", i+1, rec.calls())
		}
		a, b := rec.last()["api"][zoneA], rec.last()["api"][zoneB]
		if a.Keep >= 1 || a.Capacity != 180 || b.Capacity != 200 || b.Keep != 1 {
			t.Errorf("r%d: zone a %+v, zone b %+v, want a spilling with both zones' capacity known", i+1, a, b)
		}
	}
	if a1, a2 := recs[0].last()["api"][zoneA].Keep, recs[1].last()["api"][zoneA].Keep; a1 != a2 {
		t.Errorf("zone a keeps %v on r1, %v on r2: want the same", a1, a2)
	}
}
