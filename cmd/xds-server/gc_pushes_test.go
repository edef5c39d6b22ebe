package main

import (
	"context"
	"runtime"
	"runtime/metrics"
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
		{inUse: 300 * mib, push: 100 * mib, want: false}, // 450 < 510: the next push fits
		{inUse: 300 * mib, push: 140 * mib, want: true},  // 510: it might start one
		{inUse: 450 * mib, push: 40 * mib, want: true},
		{inUse: 509 * mib, push: 3 * mib, want: false}, // a small push: never
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

	inUse.Store(350 * mib)
	c.PassStarted(1)
	allocated.Store(200 * mib) // passes 1 and 2 allocate 210 MiB: 350 + 315 >= 510
	c.PassStarted(2)
	c.PassDone(1, 10000) // pass 2 is under way: no collection
	allocated.Store(210 * mib)
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
	if push, _ := c.look(); push != 210*mib {
		t.Errorf("largest push %d MiB, want 210 (both passes, one push)", push/mib)
	}
}

// TestPushCollectorOnTheRuntime runs the collector on this process's own
// heap: a pass that allocates 32 MiB, far more than this small heap's
// headroom, is followed by a collection (runtime.GC, read from
// runtime/metrics) once it is done.
func TestPushCollectorOnTheRuntime(t *testing.T) {
	c := newPushCollector(prometheus.NewRegistry())
	c.quiet = time.Millisecond
	collected := make(chan struct{}, 4)
	c.collect = func() { runtime.GC(); collected <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { c.run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	before := gcCycles()
	c.PassStarted(1)
	for range 32 {
		sink = make([]byte, 1<<20) // a push's garbage
	}
	c.PassDone(1, 1)
	select {
	case <-collected:
	case <-time.After(10 * time.Second):
		t.Fatal("no collection after a 32 MiB push")
	}
	if push, h := c.look(); push < 32<<20 || h.goal == 0 || h.allocated == 0 {
		t.Errorf("push %d bytes, heap %+v: want at least 32 MiB and the runtime's figures", push, h)
	}
	if gcCycles() <= before {
		t.Error("the runtime counted no collection")
	}
}

var sink []byte

func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
