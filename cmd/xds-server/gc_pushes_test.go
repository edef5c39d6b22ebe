package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestShouldCollect(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		goal, inUse, push uint64
		want              bool
	}{
		{goal: 600 * mib, inUse: 300 * mib, push: 100 * mib, want: false}, // 450 < 600: the next push fits
		{goal: 600 * mib, inUse: 300 * mib, push: 200 * mib, want: true},  // 600: it would start one
		{goal: 600 * mib, inUse: 500 * mib, push: 80 * mib, want: true},
		{goal: 8 * mib, inUse: 7 * mib, push: 3 * mib, want: false}, // a small push: never
	} {
		if got := shouldCollect(c.goal, c.inUse, c.push); got != c.want {
			t.Errorf("shouldCollect(%d, %d, %d MiB) = %v, want %v", c.goal/mib, c.inUse/mib, c.push/mib, got, c.want)
		}
	}
}

// TestPushCollectorWaitsForTheLastPass: a pass done while a later one is
// under way collects nothing; the later one's end collects once, sized
// by the largest push remembered.
func TestPushCollectorWaitsForTheLastPass(t *testing.T) {
	const mib = 1 << 20
	var allocated, inUse atomic.Uint64
	collected := make(chan uint64, 4) // the last pass done when a collection ran
	c := newPushCollector(prometheus.NewRegistry())
	c.quiet = time.Millisecond
	c.heap = func() (uint64, uint64, uint64) { return allocated.Load(), 600 * mib, inUse.Load() }
	c.collect = func() {
		inUse.Store(100 * mib) // what a collection frees: a wake-up queued meanwhile finds room
		collected <- c.finished.Load()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan struct{})
	go func() { c.run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	inUse.Store(350 * mib)
	c.PassStarted(1)
	allocated.Store(200 * mib) // pass 1 allocates 200 MiB: 350 + 300 >= 600
	c.PassStarted(2)
	c.PassDone(1, 10000) // pass 2 is under way: no collection
	allocated.Store(210 * mib)
	c.PassDone(2, 10) // a small pass; the big one is remembered
	select {
	case last := <-collected:
		if last != 2 {
			t.Fatalf("collected when pass %d was the last done, want 2 (pass 2 was under way after 1)", last)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no collection after the last pass")
	}
	if got := testutil.ToFloat64(c.total); got != 1 {
		t.Errorf("xds_gc_between_pushes_total = %v, want 1", got)
	}
	if c.largest() != 200*mib {
		t.Errorf("largest push %d MiB, want 200", c.largest()/mib)
	}
}
