package main

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestReleaseDue(t *testing.T) {
	const mib = 1 << 20
	prev := heapState{allocated: 1000 * mib}
	for _, c := range []struct {
		name string
		cur  heapState
		want bool
	}{
		{"a storm's garbage, quiet", heapState{allocated: 1001 * mib, live: 250 * mib, inUse: 400 * mib, free: 50 * mib}, true},
		{"free pages alone", heapState{allocated: 1000 * mib, live: 250 * mib, inUse: 250 * mib, free: 70 * mib}, true},
		{"still allocating", heapState{allocated: 1003 * mib, live: 250 * mib, inUse: 400 * mib, free: 50 * mib}, false},
		{"under the least surplus", heapState{allocated: 1000 * mib, live: 10 * mib, inUse: 60 * mib, free: 3 * mib}, false},
		{"small against the live heap", heapState{allocated: 1000 * mib, live: 1000 * mib, inUse: 1100 * mib, free: 100 * mib}, false},
		{"live above objects (read between a collection's phases)", heapState{allocated: 1000 * mib, live: 300 * mib, inUse: 200 * mib, free: 80 * mib}, true},
	} {
		if got := releaseDue(prev, c.cur); got != c.want {
			t.Errorf("%s: releaseDue = %v, want %v (surplus %d MiB)", c.name, got, c.want, c.cur.surplus()/mib)
		}
	}
}

// fakeHeap is a heap the releaser reads; release returns its surplus.
type fakeHeap struct {
	mu  sync.Mutex
	h   heapState
	now time.Time
}

func (f *fakeHeap) read() heapState { f.mu.Lock(); defer f.mu.Unlock(); return f.h }

func (f *fakeHeap) set(fn func(h *heapState)) { f.mu.Lock(); fn(&f.h); f.mu.Unlock() }

func (f *fakeHeap) clock() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }

// TestMemReleaserLoop: a release after two quiet reads with a surplus,
// none while allocating or within releaseGap of the last, and the
// counters.
func TestMemReleaserLoop(t *testing.T) {
	const mib = 1 << 20
	f := &fakeHeap{h: heapState{live: 200 * mib, inUse: 200 * mib}, now: time.Unix(1000, 0)}
	released := make(chan struct{}, 4)
	reg := prometheus.NewRegistry()
	r := newMemReleaser(reg)
	var held []uint64
	r.read, r.now, r.hold = f.read, f.clock, func(goal uint64) { held = append(held, goal) }
	r.release = func() {
		f.set(func(h *heapState) { h.inUse, h.free = h.live, 0 })
		released <- struct{}{}
	}
	ticks := make(chan time.Time) // unbuffered: a send returns once the loop took it, the read before it done
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { r.loop(ctx, ticks); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	tick := func() { ticks <- time.Time{} }
	storm := func() { // a burst: 300 MiB allocated, 200 MiB of it garbage now, the goal at 800 MiB
		f.set(func(h *heapState) { h.allocated += 300 * mib; h.inUse, h.goal = h.live+200*mib, 800*mib })
	}
	none := func(when string) {
		tick() // the loop took it: the previous read, and any release, are done
		select {
		case <-released:
			t.Fatalf("released %s", when)
		default:
		}
	}

	storm()
	tick()                   // the storm's read: busy
	none("while allocating") // quiet 1
	tick()                   // quiet 2: the release
	<-released
	if got := testutil.ToFloat64(r.releases); got != 1 {
		t.Fatalf("xds_memory_releases_total = %v, want 1", got)
	}
	if got := testutil.ToFloat64(r.bytes); got != 200*mib {
		t.Fatalf("xds_memory_released_bytes_total = %v, want %d", got, 200*mib)
	}
	if len(held) != 1 || held[0] != 800*mib {
		t.Fatalf("goals held %v, want the goal before the release, 800 MiB", held)
	}

	storm()
	for range 4 {
		none("within releaseGap of the last release")
	}
	f.mu.Lock()
	f.now = f.now.Add(releaseGap)
	f.mu.Unlock()
	tick()
	<-released
	if got := testutil.ToFloat64(r.releases); got != 2 {
		t.Fatalf("xds_memory_releases_total = %v, want 2", got)
	}
}

func TestHeldPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		goal, live uint64
		now, want  int
		ok         bool
	}{
		{goal: 900 * mib, live: 300 * mib, now: 100, want: 200, ok: true}, // the storm's goal kept
		{goal: 500 * mib, live: 300 * mib, now: 100, want: 100},           // pacing comes later anyway
		{goal: 200 * mib, live: 300 * mib, now: 100, want: 100},           // the goal is behind the live heap
		{goal: 900 * mib, live: 0, now: 100, want: 100},
		{goal: 900 * mib, live: 300 * mib, now: 400, want: 400}, // a heap floor's GOGC is larger
	} {
		got, ok := heldPercent(c.goal, c.live, c.now)
		if got != c.want || ok != c.ok {
			t.Errorf("heldPercent(%d MiB, %d MiB, %d) = %d, %v; want %d, %v", c.goal/mib, c.live/mib, c.now, got, ok, c.want, c.ok)
		}
	}
}

// TestHoldGoal: the runtime's GOGC is raised for one cycle and set back
// after the next collection, with the heap floor's tuner held off.
func TestHoldGoal(t *testing.T) {
	runtime.GC()
	gogc := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	before := gogc()
	holdGoal(1 << 40) // far past any live heap here
	held := gogc()
	if !gcHeld.Load() || held <= before {
		t.Fatalf("after holdGoal: held %v, GOGC %d (was %d): want held and raised", gcHeld.Load(), held, before)
	}
	deadline := time.Now().Add(10 * time.Second)
	for gcHeld.Load() { // the cleanup runs after a collection, on its own goroutine
		if time.Now().After(deadline) {
			t.Fatal("the hold was not released after collections")
		}
		runtime.GC()
		runtime.Gosched()
	}
	// Back as it was, or as the heap floor's tuner of an earlier test in
	// this process set it since: not the held value.
	if got := gogc(); got == held {
		t.Fatalf("GOGC after the hold = %d, still the held value", got)
	}
}
