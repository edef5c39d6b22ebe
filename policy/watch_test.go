package policy

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// TestOnChangeSerialized: lists of two kinds land while the first kind's
// callback is still running. The second callback waits for the first,
// so a callback that reads All and hands its view on (as the server
// does) leaves the newest view last, not the first callback's older one.
func TestOnChangeSerialized(t *testing.T) {
	client, err := api.NewClient(api.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var (
		w              *Watcher
		inFlight, most atomic.Int32
		mu             sync.Mutex
		last           map[string]Policy
		entered        = make(chan string, 2)
		release        = make(chan struct{})
	)
	w, err = NewWatcher(WatcherConfig{Client: client, OnChange: func(kind string, _ Update) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		view := w.All()
		entered <- kind
		if kind == KindResolver {
			<-release
		}
		mu.Lock()
		last = view
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { w.apply(KindResolver, []api.ConfigEntry{resolver("web", nil)}) })
	if k := <-entered; k != KindResolver {
		t.Fatalf("first callback for %q", k)
	}
	wg.Go(func() {
		w.apply(KindDefaults, []api.ConfigEntry{&api.ServiceConfigEntry{Kind: KindDefaults, Name: "web", Protocol: "http", ModifyIndex: 5}})
	})
	deadline := time.Now().Add(10 * time.Second)
	for w.Policy("web").Protocol != "http" { // the second list is applied; its callback comes next
		if time.Now().After(deadline) {
			t.Fatal("service-defaults never applied")
		}
		runtime.Gosched()
	}
	for range 100 { // room for an unserialized second callback to run to its end
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Errorf("%d callbacks ran at once; want 1", m)
	}
	if p := last["web"]; p.Protocol != "http" || p.Resolver == nil {
		t.Errorf("the last view handed on: %+v; want both the resolver and protocol http", p)
	}
}
