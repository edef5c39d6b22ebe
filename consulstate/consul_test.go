package consulstate

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
)

// consulClient starts a Consul agent for t (skipped with -short) and
// returns its client.
func consulClient(t *testing.T) *api.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("integration: real Consul")
	}
	return harness.Consul(t).Client()
}

// awaitTrue polls cond every 20ms until it holds or within passes.
func awaitTrue(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTxnCheckAndSetAgainstConsul(t *testing.T) {
	client := consulClient(t)
	ctx := context.Background()
	create := api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: "t/a", Value: []byte("1"), Index: 0}}}
	ok, idx, err := Txn(ctx, client, create)
	if err != nil || !ok || idx == 0 {
		t.Fatalf("create: ok %v, index %d, err %v; want true, > 0, nil", ok, idx, err)
	}
	ok, idx2, err := Txn(ctx, client, create)
	if err != nil || ok || idx2 != 0 {
		t.Fatalf("second create: ok %v, index %d, err %v; want a rollback (false, 0, nil)", ok, idx2, err)
	}
	update := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: "t/a", Value: []byte("2"), Index: idx}},
		{KV: &api.KVTxnOp{Verb: api.KVSet, Key: "t/b", Value: []byte("2")}},
	}
	ok, idx3, err := Txn(ctx, client, update)
	if err != nil || !ok || idx3 <= idx {
		t.Fatalf("update at %d: ok %v, index %d, err %v; want true, > %d", idx, ok, idx3, err, idx)
	}
	if p, _, err := client.KV().Get("t/b", nil); err != nil || p == nil || string(p.Value) != "2" {
		t.Fatalf("t/b after the update: %v %v", p, err)
	}
}

func TestKeepAliveMovesToANewSessionWhenConsulLostIt(t *testing.T) {
	client := consulClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scfg := SessionConfig{Name: "consulstate test", TTL: 10 * time.Second}
	first, err := CreateSession(ctx, client, scfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	current := first
	id := func() string { mu.Lock(); defer mu.Unlock(); return current }
	done := make(chan error, 1)
	go func() {
		done <- KeepAlive(ctx, KeepAliveConfig{Client: client, Session: id, Every: 50 * time.Millisecond,
			Lost: func(ctx context.Context) error {
				s, err := CreateSession(ctx, client, scfg)
				if err == nil {
					mu.Lock()
					current = s
					mu.Unlock()
				}
				return err
			}})
	}()
	if err := DestroySession(ctx, client, first); err != nil {
		t.Fatal(err)
	}
	awaitTrue(t, 5*time.Second, "a new session", func() bool { return id() != first })
	live, err := LiveSessions(ctx, client)
	if err != nil || !live[id()] || live[first] {
		t.Fatalf("live sessions %v (%v): want %s and not %s", live, err, id(), first)
	}
	if !SessionGone(ctx, client, first) || SessionGone(ctx, client, id()) {
		t.Errorf("SessionGone: the destroyed one %v, the new one %v; want true, false",
			SessionGone(ctx, client, first), SessionGone(ctx, client, id()))
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("KeepAlive after ctx done = %v, want nil", err)
	}
}

func TestLeadHandsOverOnACleanStop(t *testing.T) {
	client := consulClient(t)
	var mu sync.Mutex
	leading := map[string]string{} // campaign -> session while leading
	leader := func() (string, int) {
		mu.Lock()
		defer mu.Unlock()
		who := ""
		for name := range leading {
			who = name
		}
		return who, len(leading)
	}
	stops := map[string]context.CancelFunc{}
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b"} {
		ctx, cancel := context.WithCancel(context.Background())
		stops[name] = cancel
		defer cancel()
		cfg := LeadConfig{Client: client, Key: "t/leader", Value: []byte(name),
			Session: SessionConfig{Name: "consulstate test " + name, TTL: 10 * time.Second, LockDelay: 15 * time.Second},
			Leading: func(sid string) {
				mu.Lock()
				defer mu.Unlock()
				if sid == "" {
					delete(leading, name)
				} else {
					leading[name] = sid
				}
			}}
		wg.Add(1)
		go func() { defer wg.Done(); Lead(ctx, cfg) }()
	}
	awaitTrue(t, 5*time.Second, "a leader", func() bool { _, n := leader(); return n == 1 })
	first, _ := leader()
	p, _, err := client.KV().Get("t/leader", nil)
	if err != nil || p == nil || string(p.Value) != first || p.Session == "" {
		t.Fatalf("leader key %+v (%v), want held by %s", p, err, first)
	}
	start := time.Now()
	stops[first]()
	// A clean stop releases the key: the other takes it well before the
	// 15s lock-delay a lost session would impose.
	awaitTrue(t, 5*time.Second, "the other leads", func() bool { who, n := leader(); return n == 1 && who != first })
	t.Logf("lead handed over from %s in %v", first, time.Since(start))
	for _, stop := range stops {
		stop()
	}
	wg.Wait()
	if _, n := leader(); n != 0 {
		t.Errorf("%d campaigns still leading after they stopped", n)
	}
	live, err := LiveSessions(context.Background(), client)
	if err != nil || len(live) != 0 {
		t.Errorf("sessions left after both stopped: %v (%v); want none", live, err)
	}
}

func TestWatchFollowsKV(t *testing.T) {
	client := consulClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		list := func(q *api.QueryOptions) (api.KVPairs, *api.QueryMeta, error) { return client.KV().List("w/", q) }
		Watch(ctx, WatchConfig{Op: "test", Wait: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, list,
			func(pairs api.KVPairs, index uint64) {
				mu.Lock()
				defer mu.Unlock()
				seen = seen[:0]
				for _, p := range pairs {
					seen = append(seen, p.Key+"="+string(p.Value))
				}
			})
	}()
	for _, v := range []string{"1", "2"} {
		if _, err := client.KV().Put(&api.KVPair{Key: "w/k", Value: []byte(v)}, nil); err != nil {
			t.Fatal(err)
		}
		awaitTrue(t, 5*time.Second, "w/k="+v, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen) == 1 && seen[0] == "w/k="+v
		})
	}
	cancel()
	<-done // a blocking query in flight ends with ctx
}

func TestLeadTakesANewSessionWhenConsulLostIt(t *testing.T) {
	client := consulClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var sessions []string // each lead's session, "" when it ended
	var errs []string
	cfg := LeadConfig{Client: client, Key: "t/leader", Value: []byte("a"),
		Session: SessionConfig{Name: "consulstate test", TTL: 10 * time.Second, LockDelay: 10 * time.Millisecond},
		CountError: func(op string, err error) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, op)
		},
		Leading: func(sid string) {
			mu.Lock()
			defer mu.Unlock()
			sessions = append(sessions, sid)
		}}
	done := make(chan struct{})
	go func() { defer close(done); Lead(ctx, cfg) }()
	leads := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), sessions...) }
	awaitTrue(t, 5*time.Second, "the lead", func() bool { return len(leads()) == 1 })
	first := leads()[0]
	if err := DestroySession(ctx, client, first); err != nil { // as Consul does when it invalidates it
		t.Fatal(err)
	}
	awaitTrue(t, 5*time.Second, "the lead again", func() bool { return len(leads()) == 3 })
	got := leads()
	if got[1] != "" || got[2] == "" || got[2] == first {
		t.Fatalf("leads %q: want the first session, its end, then a new session", got)
	}
	if p, _, err := client.KV().Get("t/leader", nil); err != nil || p == nil || p.Session != got[2] {
		t.Fatalf("leader key %+v (%v), want held by %s", p, err, got[2])
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	// The lost session is found by the failed lock (a new one at once),
	// not at the next renewal (TTL/2 later).
	if !slices.Contains(errs, "lock") {
		t.Errorf("errors counted %v, want a failed lock", errs)
	}
}
