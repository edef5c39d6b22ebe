package weights

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/xds-server/xds-server/discovery"
)

// fakePublisher records what the pipeline publishes.
type fakePublisher struct {
	mu     sync.Mutex
	global map[string]map[string]uint32
	nodes  map[string]map[string]map[string]uint32
}

func (f *fakePublisher) SetWeights(w map[string]map[string]uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.global = w
}

func (f *fakePublisher) SetNodeWeights(w map[string]map[string]map[string]uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes = w
}

func newTestPipeline(t *testing.T, services map[string]ServiceConfig, lameDuck LameDuckFunc) *Pipeline {
	t.Helper()
	g := grpc.NewServer()
	t.Cleanup(g.Stop)
	p, err := NewPipeline(PipelineConfig{
		Tracker: DefaultConfig(), Solve: DefaultSolveConfig(),
		Services:  func(s string) ServiceConfig { return services[s] },
		Publisher: &fakePublisher{}, GRPC: g, LameDuckMetric: "lame_duck",
		UpdatePeriod: time.Second, MinPushInterval: time.Second, ORCAInterval: time.Second, LRSInterval: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.orca.Close)
	if lameDuck != nil {
		p.SubscribeLameDuck(lameDuck)
	}
	return p
}

func TestPipelineConfigValidate(t *testing.T) {
	if err := (PipelineConfig{}).Validate(); err == nil {
		t.Error("empty config: want errors for services, publisher and gRPC server")
	}
}

func TestPipelineSourceFilter(t *testing.T) {
	var lame []string
	p := newTestPipeline(t, map[string]ServiceConfig{
		"api": {Enabled: true, Sources: []string{SourceHTTP}},
		"web": {Enabled: true, Mode: ModePerNode, Sources: []string{SourceLRS}, ORCAPortMeta: "orca_port"},
	}, func(service, endpoint string, on bool) {
		lame = append(lame, fmt.Sprint(service, "/", endpoint, "=", on))
	})
	p.Observe(discovery.Snapshot{Services: []discovery.Service{
		{Name: "api", Endpoints: []discovery.Endpoint{{ID: "a1", Address: "10.0.0.1", Port: 80, Weight: 1}}},
		{Name: "off", Endpoints: []discovery.Endpoint{{ID: "o1", Address: "10.0.0.3", Port: 80}}},
		{Name: "web", Endpoints: []discovery.Endpoint{{ID: "w1", Address: "10.0.0.2", Port: 8080, Meta: map[string]string{"orca_port": "9000"}}}},
	}})
	now := time.Unix(1_000_000, 0)
	r := Report{Service: "api", Endpoint: "a1", At: now, QPS: 10, CPU: 0.5, LameDuck: true}
	if err := p.sink(SourceORCA).Observe(r, now); !errors.Is(err, ErrUnknownEndpoint) {
		t.Errorf("orca report for an http-only service: %v, want ErrUnknownEndpoint", err)
	}
	if n := p.lame.publish(); n != 1 || len(lame) != 1 || lame[0] != "api/a1=true" {
		t.Errorf("lame-duck transitions %d %v, want api/a1=true (every ORCA report, taken or not)", n, lame)
	}
	if err := p.sink(SourceHTTP).Observe(r, now); err != nil {
		t.Errorf("http report for an http service: %v", err)
	}
	if !p.sink(SourceHTTP).(sourceFilter).Known("api", "a1") || p.sink(SourceLRS).(sourceFilter).Known("api", "a1") {
		t.Error("Known must follow the service's sources")
	}
	if id, ok := p.resolve("web", "10.0.0.2", 8080); !ok || id != "w1" {
		t.Errorf("resolve = %q %v, want w1", id, ok)
	}
	if _, ok := p.resolve("off", "10.0.0.3", 80); ok {
		t.Error("a service without weights must not resolve")
	}
	if !p.perSvc["web"] || p.perSvc["api"] {
		t.Errorf("per-node services = %v, want web only", p.perSvc)
	}
}

func TestORCAPort(t *testing.T) {
	for name, tc := range map[string]struct {
		meta map[string]string
		want string
	}{
		"meta port":    {meta: map[string]string{"orca_port": "9000"}, want: "9000"},
		"no meta":      {want: "80"},
		"bad meta":     {meta: map[string]string{"orca_port": "x"}, want: "80"},
		"out of range": {meta: map[string]string{"orca_port": "70000"}, want: "80"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := orcaPort(discovery.Endpoint{Port: 80, Meta: tc.meta}, "orca_port"); got != tc.want {
				t.Errorf("orcaPort = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestPipelineSplit: the LRS split of a node is its subset in the shares
// of the weights last published (equal before any), and unknown for a node
// the subsets fed do not list.
func TestPipelineSplit(t *testing.T) {
	p := newTestPipeline(t, map[string]ServiceConfig{"api": {Enabled: true, Sources: []string{SourceHTTP}}}, nil)
	p.SetSubsets(SubsetsMap{"api": {"n": {"a1", "a2"}}})
	p.Observe(discovery.Snapshot{Services: []discovery.Service{{Name: "api", Endpoints: []discovery.Endpoint{
		{ID: "a1", Address: "10.0.0.1", Port: 80, Weight: 1}, {ID: "a2", Address: "10.0.0.2", Port: 80, Weight: 1}}}}})
	ids, shares, ok := p.split("n", "api")
	if !ok || len(ids) != 2 || shares[0] != 0.5 || shares[1] != 0.5 {
		t.Fatalf("before any weights: %v %v %v, want [a1 a2] in equal shares", ids, shares, ok)
	}
	if _, _, ok := p.split("stranger", "api"); ok {
		t.Error("a node without a subset has a split")
	}
	t0 := time.Unix(1_000_000, 0)
	for _, at := range []time.Time{t0, t0.Add(DefaultBlackoutPeriod + time.Second)} {
		for id, cpu := range map[string]float64{"a1": 0.25, "a2": 0.75} { // capacities 3:1 at equal qps
			if err := p.sink(SourceHTTP).Observe(Report{Service: "api", Endpoint: id, At: at, QPS: 30, CPU: cpu}, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	p.Step(t0.Add(DefaultBlackoutPeriod + time.Second))
	ids, shares, _ = p.split("n", "api")
	if ids[0] != "a1" || shares[0] < 0.7 || shares[0] > 0.8 || shares[0]+shares[1] < 1-1e-9 {
		t.Errorf("after weights 3:1: %v %v, want a1 at about 0.75", ids, shares)
	}
}
