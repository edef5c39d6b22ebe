package ha

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
	"github.com/xds-server/xds-server/weights"
)

// checkStatus is the status of check id on agent, "" when it is not
// registered.
func checkStatus(t *testing.T, agent *harness.ConsulAgent, id string) string {
	t.Helper()
	checks, err := agent.Client().Agent().Checks()
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := checks[id]; ok {
		return c.Status
	}
	return ""
}

// awaitCheck polls the agent (an external process) until check id has
// status want ("" for deregistered).
func awaitCheck(t *testing.T, agent *harness.ConsulAgent, id, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for checkStatus(t, agent, id) != want {
		if time.Now().After(deadline) {
			t.Fatalf("check %s is %q after %v, want %q", id, checkStatus(t, agent, id), within, want)
		}
		time.Sleep(50 * time.Millisecond) // polling an external process
	}
}

// TestAliveCheckLifecycle: the alive check is registered passing, stays
// passing past several TTLs while Run keeps it, is registered again when
// the agent loses it (a restarted -dev agent), is deregistered when Run
// stops; a critical alive check of a replica killed without a goodbye is
// removed by the next replica's Register, another replica's passing one
// is not.
func TestAliveCheckLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: real Consul")
	}
	agent := harness.Consul(t)
	const ttl = 600 * time.Millisecond
	if _, err := NewAlive(AliveConfig{Client: agent.Client(), Replica: "x", TTL: 10 * time.Millisecond}); err == nil {
		t.Error("NewAlive accepted a 10ms TTL")
	}
	dead, err := NewAlive(AliveConfig{Client: agent.Client(), Replica: "dead", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Register(); err != nil {
		t.Fatal(err)
	}
	awaitCheck(t, agent, dead.CheckID(), api.HealthCritical, 5*time.Second) // nobody keeps it

	a, err := NewAlive(AliveConfig{Client: agent.Client(), Replica: "a", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Register(); err != nil {
		t.Fatal(err)
	}
	if got := checkStatus(t, agent, dead.CheckID()); got != "" {
		t.Errorf("the dead replica's critical check is %q after a new Register, want removed", got)
	}
	if got := checkStatus(t, agent, a.CheckID()); got != api.HealthPassing {
		t.Fatalf("registered check is %q, want passing", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	b, err := NewAlive(AliveConfig{Client: agent.Client(), Replica: "b", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Register(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(4 * ttl)
	for time.Now().Before(deadline) {
		if got := checkStatus(t, agent, a.CheckID()); got != api.HealthPassing {
			t.Fatalf("kept check is %q, want passing past its TTL", got)
		}
		time.Sleep(ttl / 6) // sampling an external process
	}
	if err := agent.Client().Agent().CheckDeregister(a.CheckID()); err != nil {
		t.Fatal(err)
	}
	awaitCheck(t, agent, a.CheckID(), api.HealthPassing, 5*time.Second) // registered again
	cancel()
	<-done
	if got := checkStatus(t, agent, a.CheckID()); got != "" {
		t.Errorf("check is %q after Run stopped, want deregistered", got)
	}
}

// TestLeaderKilledLosesLeadWithAliveCheck: the leader's session names its
// alive check; when the leader is cut off from Consul (killed, for
// Consul), its check goes critical within the TTL and another replica
// leads within TTL + lock delay + a publish interval, far less than the
// session TTL (10s, up to 2x) plus the lock delay; the table served never
// falls back.
func TestLeaderKilledLosesLeadWithAliveCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: real Consul")
	}
	agent := harness.Consul(t)
	const ttl = time.Second
	ct := &cutTransport{next: http.DefaultTransport}
	c1, err := api.NewClient(&api.Config{Address: agent.Addr(), HttpClient: &http.Client{Transport: ct}})
	if err != nil {
		t.Fatal(err)
	}
	alive, err := NewAlive(AliveConfig{Client: c1, Replica: "xds-1", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if err := alive.Register(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { alive.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	r1 := startWReplicaWith(t, c1, "xds-1", weights.ModeGlobal, nil, []string{alive.CheckID()})
	leaderOf(t, []*wReplica{r1}, 10*time.Second)
	r2 := startWReplica(t, agent.Client(), "xds-2", weights.ModeGlobal, nil)
	stop := reporter(t, func() *wReplica { return r2 }, func() map[string]float64 {
		return map[string]float64{"a": 0.4, "b": 0.2, "c": 0.8}
	})
	defer stop()
	waitSame(t, []*wReplica{r1, r2}, 10*time.Second, ratio241)
	mark := len(r2.rec.history()) - 1
	ct.cut.Store(true)
	died := time.Now()
	leaderOf(t, []*wReplica{r2}, testLockDelay+15*time.Second)
	took := time.Since(died)
	t.Logf("leader xds-1 cut off (alive TTL %v, lock delay %v, publish interval %v): xds-2 leads after %v", ttl, testLockDelay, testInterval, took)
	if limit := ttl + testLockDelay + testInterval + 2*time.Second; took > limit { // +2s: the agent syncs the critical status to the catalog (1.4s seen under load)
		t.Errorf("takeover after %v, want within alive TTL + lock delay + publish interval (+2s) = %v", took, limit)
	}
	for _, w := range r2.rec.history()[mark:] {
		if isFallback(w) {
			t.Errorf("xds-2 served the fallback %v", w)
		}
	}
}

// stallTransport holds the first request whose path has stall in it until
// its context is done, and reports each later one that got an answer.
type stallTransport struct {
	next     http.RoundTripper
	stall    string
	mu       sync.Mutex
	stalled  bool
	answered chan struct{}
}

func (s *stallTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.Contains(r.URL.Path, s.stall) {
		return s.next.RoundTrip(r)
	}
	s.mu.Lock()
	first := !s.stalled
	s.stalled = true
	s.mu.Unlock()
	if first { // an agent that does not answer
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	resp, err := s.next.RoundTrip(r)
	if err == nil {
		select {
		case s.answered <- struct{}{}:
		default:
		}
	}
	return resp, err
}

// TestAliveUpdateNotAnswered: an update the agent does not answer is given
// up after a third of the TTL and made again at the next tick, so the
// check stays passing past its TTL (waiting on the first update would
// leave it critical, and the leader without its lead).
func TestAliveUpdateNotAnswered(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: real Consul")
	}
	agent := harness.Consul(t)
	const ttl = 3 * time.Second
	st := &stallTransport{next: http.DefaultTransport, stall: "/agent/check/update/", answered: make(chan struct{}, 1)}
	c, err := api.NewClient(&api.Config{Address: agent.Addr(), HttpClient: &http.Client{Transport: st}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAlive(AliveConfig{Client: c, Replica: "xds-1", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Register(); err != nil {
		t.Fatal(err)
	}
	registered := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	select {
	case <-st.answered:
	case <-time.After(2 * ttl):
		t.Fatalf("no update answered within %v after one the agent did not answer", 2*ttl)
	}
	t.Logf("an update answered %v after the registration (TTL %v)", time.Since(registered).Round(time.Millisecond), ttl)
	time.Sleep(time.Until(registered.Add(ttl + ttl/3))) // past the registration's TTL: nothing to await but time
	if got := checkStatus(t, agent, a.CheckID()); got != api.HealthPassing {
		t.Errorf("check %s is %q past its TTL, want passing", a.CheckID(), got)
	}
}
