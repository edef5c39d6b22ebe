package weights

import (
	"testing"
	"time"

	"github.com/xds-server/xds-server/discovery"
)

// stagePipeline is a pipeline with one per_node service "api" of two
// endpoints that reported 3:1 capacities, nodes n1 and n2 their rates,
// and the time after the reports.
func stagePipeline(t *testing.T) (*Pipeline, time.Time) {
	t.Helper()
	p := newTestPipeline(t, map[string]ServiceConfig{"api": {Enabled: true, Mode: ModePerNode, Sources: []string{SourceHTTP}}}, nil)
	p.Observe(discovery.Snapshot{Services: []discovery.Service{{Name: "api", Endpoints: []discovery.Endpoint{
		{ID: "a1", Address: "10.0.0.1", Port: 80, Weight: 1}, {ID: "a2", Address: "10.0.0.2", Port: 80, Weight: 1}}}}})
	t0 := time.Unix(1_000_000, 0)
	for _, at := range []time.Time{t0, t0.Add(DefaultBlackoutPeriod + time.Second)} {
		for id, cpu := range map[string]float64{"a1": 0.25, "a2": 0.75} {
			if err := p.sink(SourceHTTP).Observe(Report{Service: "api", Endpoint: id, At: at, QPS: 30, CPU: cpu}, at); err != nil {
				t.Fatal(err)
			}
			for _, node := range []string{"n1", "n2"} { // the nodes' own rates (as LRS gives them)
				if err := p.sink(SourceHTTP).Observe(Report{Service: "api", Endpoint: id, Node: node, At: at, QPS: 10}, at); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return p, t0.Add(DefaultBlackoutPeriod + time.Second)
}

// The per-node part of the publish stage plans over the view it is given,
// whatever was fed last: a node the view lists gets weights of its own,
// and a view without it withdraws them.
func TestStagePublishNodesReadsItsView(t *testing.T) {
	p, now := stagePipeline(t)
	pub := p.cfg.Publisher.(*fakePublisher)
	tab := p.runner.Track(now)
	if !p.publishNodes(tab, SubsetsMap{"api": {"n1": {"a1", "a2"}}}) {
		t.Fatal("a node in the view: nothing published")
	}
	if w := pub.nodes["api"]["n1"]; len(w) != 2 {
		t.Fatalf("n1's weights %v, want its two endpoints", pub.nodes)
	}
	if !p.publishNodes(tab, SubsetsMap{}) || len(pub.nodes) != 0 {
		t.Errorf("an empty view: node weights %v, want withdrawn", pub.nodes)
	}
}

// Step runs on the subsets last fed; before any it runs on none.
func TestStepReadsTheLatestSubsets(t *testing.T) {
	p, now := stagePipeline(t)
	pub := p.cfg.Publisher.(*fakePublisher)
	if !p.Step(now) || len(pub.nodes) != 0 {
		t.Fatalf("first step without subsets: node weights %v, want none", pub.nodes)
	}
	p.SetSubsets(SubsetsMap{"api": {"n1": {"a1", "a2"}, "n2": {"a2"}}})
	if !p.Step(now.Add(time.Minute)) || len(pub.nodes["api"]) != 2 {
		t.Errorf("after SetSubsets: node weights %v, want n1 and n2", pub.nodes)
	}
}
