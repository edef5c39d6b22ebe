package nodeindex

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/e2e/harness"
)

// consulTestTTL is the reservation TTL of the integration tests; the clock
// is injected, so it never elapses by itself.
const consulTestTTL = 10 * time.Minute

// consulClock is a settable clock shared by the replicas of a test.
type consulClock struct {
	mu  sync.Mutex
	now time.Time
}

func newConsulClock() *consulClock {
	return &consulClock{now: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *consulClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *consulClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// consulIndexEnv is one test's view of the shared agent: its own KV prefix
// and clock.
type consulIndexEnv struct {
	client *api.Client
	prefix string
	clock  *consulClock
}

// replica starts a Consul named name, closed when the test ends.
func (e *consulIndexEnv) replica(t *testing.T, name string) *Consul {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ix, err := NewConsul(ctx, ConsulConfig{
		Client: e.client, Prefix: e.prefix, TTL: consulTestTTL, Replica: name,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: e.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ix.Close(); err != nil {
			t.Errorf("close %s: %v", name, err)
		}
	})
	return ix
}

// table reads group's stored table.
func (e *consulIndexEnv) table(t *testing.T, ix *Consul, group string) *indexTable {
	t.Helper()
	pair, _, err := e.client.KV().Get(ix.key(group), nil)
	if err != nil {
		t.Fatal(err)
	}
	if pair == nil {
		t.Fatalf("no key %s", ix.key(group))
	}
	tb, err := decodeIndexTable(pair.Value)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func consulAcquire(t *testing.T, ix *Consul, group, node string, want int) {
	t.Helper()
	got, err := ix.Acquire(context.Background(), group, node)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("%s: Acquire(%q, %q) = %d, want %d", ix.replica, group, node, got, want)
	}
}

func consulRelease(t *testing.T, ix *Consul, group, node string) {
	t.Helper()
	if err := ix.Release(context.Background(), group, node); err != nil {
		t.Fatal(err)
	}
}

// crash stops ix as a crashed process would: no releases, no renewals, and
// its session gone (as Consul invalidates it once its TTL lapses).
func (e *consulIndexEnv) crash(t *testing.T, ix *Consul) {
	t.Helper()
	ix.mu.Lock()
	ix.closed = true
	session := ix.session
	ix.mu.Unlock()
	ix.stopRenew()
	ix.renew.Wait()
	ix.cancel()
	ix.rounds.Wait()
	if _, err := e.client.Session().Destroy(session, nil); err != nil {
		t.Fatal(err)
	}
}

// TestConsulIndex runs the Consul scenarios against one real Consul
// agent, each under its own KV prefix.
func TestConsulIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test against a consul agent; skipped with -short")
	}
	client := harness.Consul(t).Client()
	for name, run := range map[string]func(t *testing.T, e *consulIndexEnv){
		"lowest free index, sticky within the ttl":    consulLowestFreeAndSticky,
		"reservation expires after the ttl":           consulReservationExpires,
		"two replicas racing get indices 0..n-1":      consulRacingReplicas,
		"same node through both replicas":             consulSameNodeTwoReplicas,
		"same new nodes racing through both replicas": consulRacingSameNodes,
		"closed replica's indices are reserved":       consulClosedReplica,
		"crashed replica's indices are reserved":      consulCrashedReplica,
		"lost session moves the holds to a new one":   consulLostSession,
		"groups are separate tables":                  consulGroups,
		"acquire given up by its context is released": consulAbandonedAcquire,
		"a corrupt table is repaired":                 consulCorruptTable,
		"12,000 nodes fit one group":                  consulLargeGroup,
		"a check puts back holds a rebuild lost":      consulCheckPutsBack,
	} {
		t.Run(name, func(t *testing.T) {
			prefix := "test/" + strings.NewReplacer(" ", "-", "'", "", ",", "", ".", "").Replace(name)
			run(t, &consulIndexEnv{client: client, prefix: prefix, clock: newConsulClock()})
		})
	}
}

func consulLowestFreeAndSticky(t *testing.T, e *consulIndexEnv) {
	a := e.replica(t, "a")
	for i, node := range []string{"n0", "n1", "n2"} {
		consulAcquire(t, a, "g", node, i)
	}
	consulAcquire(t, a, "g", "n1", 1) // held: the same index again
	consulRelease(t, a, "g", "n1")
	e.clock.Advance(consulTestTTL - time.Nanosecond)
	consulAcquire(t, a, "g", "n3", 3) // 1 is still reserved for n1
	consulAcquire(t, a, "g", "n1", 1)
	consulRelease(t, a, "g", "unknown") // no-op
	consulAcquire(t, a, "g", "n4", 4)
}

func consulReservationExpires(t *testing.T, e *consulIndexEnv) {
	a := e.replica(t, "a")
	consulAcquire(t, a, "g", "n0", 0)
	consulAcquire(t, a, "g", "n1", 1)
	consulRelease(t, a, "g", "n0")
	tb := e.table(t, a, "g")
	if s := tb.slots[0]; s.node != "n0" || s.held() || !s.releasedAt.Equal(e.clock.Now()) {
		t.Fatalf("slot 0 after release = %+v, want n0 released at %v", s, e.clock.Now())
	}
	e.clock.Advance(consulTestTTL)
	consulAcquire(t, a, "g", "n2", 0) // n0's reservation expired
	consulAcquire(t, a, "g", "n0", 2)
}

func consulRacingReplicas(t *testing.T, e *consulIndexEnv) {
	replicas := []*Consul{e.replica(t, "a"), e.replica(t, "b")}
	const perReplica = 20
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		got  []int
		errs []error
	)
	for r, ix := range replicas {
		for g := range perReplica {
			wg.Go(func() {
				i, err := ix.Acquire(context.Background(), "g", fmt.Sprintf("node-%d-%d", r, g))
				mu.Lock()
				defer mu.Unlock()
				got, errs = append(got, i), append(errs, err)
			})
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(got)
	for i, idx := range got {
		if idx != i {
			t.Fatalf("indices = %v, want exactly 0..%d", got, 2*perReplica-1)
		}
	}
	if tb := e.table(t, replicas[0], "g"); len(tb.slots) != 2*perReplica || len(tb.sessions()) != 2 {
		t.Fatalf("stored table has %d slots and %d holders, want %d and 2", len(tb.slots), len(tb.sessions()), 2*perReplica)
	}
}

func consulRacingSameNodes(t *testing.T, e *consulIndexEnv) {
	replicas := []*Consul{e.replica(t, "a"), e.replica(t, "b")}
	const nodes = 20
	var wg sync.WaitGroup
	got := make([][nodes]int, len(replicas))
	errs := make([][nodes]error, len(replicas))
	for r, ix := range replicas {
		for n := range nodes {
			wg.Go(func() {
				got[r][n], errs[r][n] = ix.Acquire(context.Background(), "g", fmt.Sprintf("node-%d", n))
			})
		}
	}
	wg.Wait()
	seen := map[int]int{}
	for n := range nodes {
		if errs[0][n] != nil || errs[1][n] != nil {
			t.Fatal(errs[0][n], errs[1][n])
		}
		if got[0][n] != got[1][n] {
			t.Fatalf("node-%d got %d through a and %d through b", n, got[0][n], got[1][n])
		}
		if m, dup := seen[got[0][n]]; dup {
			t.Fatalf("node-%d and node-%d both got %d", n, m, got[0][n])
		}
		seen[got[0][n]] = n
	}
	for i := range nodes {
		if _, ok := seen[i]; !ok {
			t.Fatalf("indices %v miss %d", seen, i)
		}
	}
}

func consulSameNodeTwoReplicas(t *testing.T, e *consulIndexEnv) {
	a, b := e.replica(t, "a"), e.replica(t, "b")
	consulAcquire(t, a, "g", "x", 0)
	consulAcquire(t, b, "g", "y", 1)
	consulAcquire(t, b, "g", "x", 0) // the same node through the other replica
	consulRelease(t, a, "g", "x")
	e.clock.Advance(2 * consulTestTTL)
	consulAcquire(t, a, "g", "z", 2) // x is still held through b
	consulRelease(t, b, "g", "x")
	e.clock.Advance(consulTestTTL - time.Nanosecond)
	consulAcquire(t, a, "g", "w", 3) // x's reservation
	consulAcquire(t, a, "g", "x", 0) // back through a
	consulRelease(t, a, "g", "x")
	e.clock.Advance(consulTestTTL)
	consulAcquire(t, b, "g", "v", 0)
}

func consulClosedReplica(t *testing.T, e *consulIndexEnv) {
	a, b := e.replica(t, "a"), e.replica(t, "b")
	consulAcquire(t, a, "g", "a0", 0)
	consulAcquire(t, a, "g", "a1", 1)
	consulAcquire(t, b, "g", "b0", 2)
	consulAcquire(t, a, "h", "a2", 0)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(context.Background(), "g", "late"); err == nil {
		t.Fatal("Acquire after Close succeeded")
	}
	consulAcquire(t, b, "g", "b1", 3) // 0 and 1 are reserved
	consulAcquire(t, b, "h", "b2", 1)
	c := e.replica(t, "c")
	consulAcquire(t, c, "g", "a1", 1) // a's node moved to c keeps its index
	e.clock.Advance(consulTestTTL)
	consulAcquire(t, b, "g", "b3", 0)
	consulAcquire(t, c, "g", "b4", 4)
}

func consulCrashedReplica(t *testing.T, e *consulIndexEnv) {
	a, b := e.replica(t, "a"), e.replica(t, "b")
	consulAcquire(t, a, "g", "a0", 0)
	consulAcquire(t, a, "g", "a1", 1)
	consulAcquire(t, b, "g", "b0", 2)
	consulAcquire(t, a, "g", "s", 3) // connected through both
	consulAcquire(t, b, "g", "s", 3)
	consulAcquire(t, a, "h", "h0", 0)
	e.crash(t, a)
	e.clock.Advance(time.Hour)
	// b finds a's session gone when it releases a node a also held: a's
	// slots are reserved from now, s's too.
	consulRelease(t, b, "g", "s")
	tb := e.table(t, b, "g")
	for _, i := range []int{0, 1, 3} {
		if s := tb.slots[i]; s.held() || !s.releasedAt.Equal(e.clock.Now()) {
			t.Fatalf("slot %d after the crash = %+v, want released at %v", i, s, e.clock.Now())
		}
	}
	consulAcquire(t, b, "g", "b1", 4)
	// In group h, b finds the crash when a new node needs a slot.
	consulAcquire(t, b, "h", "h1", 1)
	e.clock.Advance(consulTestTTL / 2)
	consulAcquire(t, b, "g", "a1", 1) // reconnected to b: its own index
	consulAcquire(t, b, "g", "b2", 5)
	e.clock.Advance(consulTestTTL / 2)
	consulAcquire(t, b, "g", "b3", 0) // a0's reservation expired
	consulAcquire(t, b, "g", "b4", 3) // and s's
	consulAcquire(t, b, "h", "h2", 0)
}

func consulLostSession(t *testing.T, e *consulIndexEnv) {
	a, b := e.replica(t, "a"), e.replica(t, "b")
	consulAcquire(t, a, "g", "a0", 0)
	consulAcquire(t, a, "g", "a1", 1)
	consulRelease(t, a, "g", "a1")
	old, _ := a.sessionState()
	if _, err := e.client.Session().Destroy(old, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.sessionLost(context.Background()); err != nil { // what the renewal loop does when Consul no longer knows the session
		t.Fatal(err)
	}
	cur, _ := a.sessionState()
	if cur == old {
		t.Fatal("renewal kept the lost session")
	}
	e.clock.Advance(consulTestTTL)
	consulAcquire(t, b, "g", "b0", 1) // a1 released and expired; a0 held by a's new session
	tb := e.table(t, b, "g")
	if got := tb.slots[0].holders; !slices.Equal(got, []string{cur}) {
		t.Fatalf("slot 0 holders = %v, want a's new session %s", got, cur)
	}
	consulRelease(t, a, "g", "a0")
	e.clock.Advance(consulTestTTL)
	consulAcquire(t, b, "g", "b1", 0)
}

func consulGroups(t *testing.T, e *consulIndexEnv) {
	a := e.replica(t, "a")
	groups := []string{"", "cluster-a", "a/b", "x y%z", "ünï"}
	for _, g := range groups {
		consulAcquire(t, a, g, "n", 0)
	}
	consulAcquire(t, a, "a/b", "m", 1)
	keys, _, err := e.client.KV().Keys(e.prefix+"/index/", "", nil) // and a backup of each under index-backup/
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(groups) || !slices.Contains(keys, e.prefix+"/index/group=") ||
		!slices.Contains(keys, e.prefix+"/index/group=a%2Fb") {
		t.Fatalf("keys = %q, want one per group", keys)
	}
}

func consulAbandonedAcquire(t *testing.T, e *consulIndexEnv) {
	a := e.replica(t, "a")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Acquire(ctx, "g", "gone"); err == nil {
		t.Skip("the acquire finished before its context was seen; nothing to undo")
	}
	// Ops of a group run in order: once this Acquire is done, whatever the
	// given-up one took has been let go of again (at most reserved).
	if _, err := a.Acquire(context.Background(), "g", "next"); err != nil {
		t.Fatal(err)
	}
	tb := e.table(t, a, "g")
	if i, ok := tb.byNode["gone"]; ok && tb.slots[i].held() {
		t.Fatalf("a given-up acquire still holds index %d", i)
	}
}

// consulLargeGroup: 12,000 nodes with ids as random as Kubernetes pods'
// (13 random hex digits each), placed through two replicas at once, all
// fit one group's table within Consul's default limits (a value and a
// transaction of 512 KiB): version 1's plain JSON failed past about
// 4,800 such nodes.
func consulLargeGroup(t *testing.T, e *consulIndexEnv) {
	const n = 12000
	replicas := []*Consul{e.replica(t, "a"), e.replica(t, "b")}
	got := make([]int, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256) // callers at once, like a connect storm
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			node := fmt.Sprintf("web-%08x-%05x.default", uint32(i)*2654435761, uint32(i)*40503&0xfffff)
			idx, err := replicas[i%2].Acquire(context.Background(), "g", node)
			if err != nil {
				errs <- err
			}
			got[i] = idx
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("acquire: %v", err)
	}
	slices.Sort(got)
	for i, idx := range got {
		if idx != i {
			t.Fatalf("sorted indices: %d at %d, want 0..%d each once", idx, i, n-1)
		}
	}
	pair, _, err := e.client.KV().Get(replicas[0].key("g"), nil)
	if err != nil {
		t.Fatal(err)
	}
	count := func(ix *Consul, result string) float64 {
		return testutil.ToFloat64(ix.metrics.attempts.WithLabelValues(result))
	}
	var written, conflicts float64
	for _, ix := range replicas {
		written, conflicts = written+count(ix, "written"), conflicts+count(ix, "conflict")
	}
	if written == 0 || testutil.CollectAndCount(replicas[0].metrics.valueBytes) != 1 {
		t.Errorf("xds_subset_index_attempts_total{result=written} %v, want > 0, and the value size histogram", written)
	}
	t.Logf("%d nodes: a stored table of %d bytes; %v writes, %v conflicts over both replicas", n, len(pair.Value), written, conflicts)
}
