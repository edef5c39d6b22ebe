package main

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestShouldCollect(t *testing.T) {
	const mib = 1 << 20
	// live 300 MiB, goal 600 MiB: Go may start collecting at 510 MiB.
	for _, c := range []struct {
		inUse, push uint64
		want        bool
	}{
		// The runway is 210 MiB: pushes of up to 35 MiB (a 52 MiB margin) count.
		{inUse: 400 * mib, push: 30 * mib, want: false}, // 445 < 510: the next push fits
		{inUse: 470 * mib, push: 30 * mib, want: true},  // 515: it might start one
		{inUse: 480 * mib, push: 20 * mib, want: true},
		{inUse: 500 * mib, push: 40 * mib, want: false}, // 60 > 52: it meets collections anyway
		{inUse: 509 * mib, push: 3 * mib, want: false},  // a small push: never
	} {
		h := heapState{goal: 600 * mib, live: 300 * mib, inUse: c.inUse}
		if got := shouldCollect(h, c.push); got != c.want {
			t.Errorf("in use %d MiB, push %d MiB: shouldCollect = %v, want %v", c.inUse/mib, c.push/mib, got, c.want)
		}
	}
	if got := (heapState{goal: 100, live: 120}).trigger(); got != 100 {
		t.Errorf("trigger past the goal = %d, want the goal", got)
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
	c.heap = func() heapState {
		return heapState{allocated: allocated.Load(), goal: 600 * mib, live: 300 * mib, inUse: inUse.Load()}
	}
	c.collect = func() {
		inUse.Store(100 * mib) // what a collection frees: a wake-up queued meanwhile finds room
		collected <- c.finished.Load()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan struct{})
	go func() { c.run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	inUse.Store(480 * mib)
	c.PassStarted(1)
	allocated.Store(28 * mib) // passes 1 and 2 allocate 30 MiB: 480 + 45 >= 510
	c.PassStarted(2)
	c.PassDone(1, 10000) // pass 2 is under way: no collection
	allocated.Store(30 * mib)
	c.PassDone(2, 10)
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
	if push, _ := c.look(); push != 30*mib {
		t.Errorf("largest push %d MiB, want 30 (both passes, one push)", push/mib)
	}
}

// TestReadHeap reads the collector's figures from the runtime: a push of
// 32 MiB is counted, and the goal is above the live heap.
func TestReadHeap(t *testing.T) {
	runtime.GC()
	before := readHeap()
	for range 32 {
		sink = make([]byte, 1<<20) // a push's garbage
	}
	after := readHeap()
	if got := after.allocated - before.allocated; got < 32<<20 {
		t.Errorf("allocated %d bytes over a 32 MiB push", got)
	}
	if before.live == 0 || before.goal <= before.live || after.inUse == 0 {
		t.Errorf("heap %+v after a collection, %+v after the push: want a live heap below its goal", before, after)
	}
}

var sink []byte
