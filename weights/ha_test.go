package weights

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/xds-server/xds-server/discovery"
)

// fakeExchange is a store of summaries and of the leader's table that
// commits a write only when told to (commit), so a test can lose one.
type fakeExchange struct {
	mu      sync.Mutex
	leader  bool
	stored  *SharedTable // the table in the store; nil: none
	seq     uint64
	pending *SharedTable // the last WriteTable not committed yet
	writes  int          // WriteTable calls
}

func (f *fakeExchange) PublishSummary(Summary) {}
func (f *fakeExchange) Summaries() []Summary   { return nil }
func (f *fakeExchange) WriteTable(t SharedTable) {
	f.mu.Lock()
	f.pending = &t
	f.writes++
	f.mu.Unlock()
}

func (f *fakeExchange) Leader() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader
}

func (f *fakeExchange) Table() (SharedTable, uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stored == nil {
		return SharedTable{}, f.seq, false
	}
	return *f.stored, f.seq, true
}

// commit writes the pending table into the store (true), or loses it.
func (f *fakeExchange) commit(ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ok && f.pending != nil {
		f.stored = f.pending
		f.seq++
	}
	f.pending = nil
}

func (f *fakeExchange) set(leader bool, stored *SharedTable) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leader, f.stored = leader, stored
	f.seq++
}

func (f *fakeExchange) take() (*SharedTable, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, n := f.pending, f.writes
	f.writes = 0
	return p, n
}

// The leader's table reaches the store even when a write is lost (the
// lead's session gone with Consul) or the store loses its state: the
// leader hands it over again at every step until the store holds it; once
// it does, nothing more is written.
func TestHALeaderRewritesATableTheStoreLacks(t *testing.T) {
	ex := &fakeExchange{leader: true}
	g := grpc.NewServer()
	t.Cleanup(g.Stop)
	tc := DefaultConfig()
	tc.BlackoutPeriod = 0
	p, err := NewPipeline(PipelineConfig{Tracker: tc, Solve: DefaultSolveConfig(),
		Services:  func(string) ServiceConfig { return ServiceConfig{Enabled: true, Sources: []string{SourceHTTP}} },
		Publisher: &fakePublisher{}, GRPC: g, HA: &HAConfig{Replica: "r1", Summaries: ex, Tables: ex},
		UpdatePeriod: time.Second, MinPushInterval: time.Second, ORCAInterval: time.Second, LRSInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.orca.Close)
	p.Observe(discovery.Snapshot{Services: []discovery.Service{{Name: "api", Endpoints: []discovery.Endpoint{
		{ID: "a", Address: "10.0.0.1", Port: 80, Weight: 1}, {ID: "b", Address: "10.0.0.2", Port: 80, Weight: 1}}}}})
	now := time.Unix(1_000_000, 0)
	report := func(cpuA, cpuB float64) {
		for id, cpu := range map[string]float64{"a": cpuA, "b": cpuB} {
			if err := p.sink(SourceHTTP).Observe(Report{Service: "api", Endpoint: id, At: now, QPS: 30, CPU: cpu}, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	step := func() {
		now = now.Add(time.Second)
		p.Step(now)
	}

	report(0.25, 0.75)
	step()
	first, n := ex.take()
	if first == nil || n == 0 {
		t.Fatal("the leader handed no table over")
	}
	step() // the write was lost: handed over again
	if again, n := ex.take(); n == 0 || again == nil || again.At != first.At {
		t.Fatalf("after a lost write: %d writes of %v, want the table %v again", n, again, first)
	}
	ex.commit(true)
	step()
	if _, n := ex.take(); n != 0 {
		t.Fatalf("%d writes with the table in the store", n)
	}

	report(0.75, 0.25) // a new table, written while the lead's session is gone
	step()
	next, _ := ex.take()
	if next == nil || next.At == first.At {
		t.Fatalf("no new table handed over after the loads changed (%v)", next)
	}
	ex.commit(false)
	step()
	if again, n := ex.take(); n == 0 || again.At != next.At {
		t.Fatalf("the lost new table was not handed over again (%d writes, %v)", n, again)
	}
	ex.commit(true)

	ex.set(true, nil) // the store lost its state (a Consul back empty)
	step()
	if again, n := ex.take(); n == 0 || again.At != next.At {
		t.Fatalf("with the store empty: %d writes of %v, want the table %v", n, again, next)
	}
	ex.commit(true)

	ex.set(false, nil) // the lead lost, the store empty: a follower writes nothing
	step()
	if _, n := ex.take(); n != 0 {
		t.Fatalf("a follower wrote %d tables", n)
	}
	stored := *next
	ex.set(true, &stored) // the lead taken again, the store holding about this table
	step()
	if _, n := ex.take(); n != 0 {
		t.Fatalf("the new leader wrote %d tables over one within the push policy", n)
	}
	ex.set(true, nil)
	step()
	if got, n := ex.take(); n == 0 || got == nil {
		t.Fatal("a leader left a store without a table")
	}
}
