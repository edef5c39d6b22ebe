package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, floor uint64
		want        int
	}{
		{8 * mib, 128 * mib, 1500}, // the next collection at 128 MiB
		{64 * mib, 128 * mib, 100}, // twice the live heap is the floor
		{100 * mib, 128 * mib, 100},
		{0, 128 * mib, 3100},   // before the first collection: from 4 MiB
		{mib, 128 * mib, 3100}, // a live heap below 4 MiB counts as 4 MiB
		{1, 1 << 62, 1 << 20},  // bounded
	} {
		if got := gcPercent(tc.live, tc.floor); got != tc.want {
			t.Errorf("gcPercent(%d, %d) = %d, want %d", tc.live, tc.floor, got, tc.want)
		}
	}
}

// The tuner sets GOGC at once, and again after a collection.
func TestGCTunerRetunes(t *testing.T) {
	old := debug.SetGCPercent(100)
	tuned := make(chan int, 64)
	g := &gcTuner{floor: 1 << 34, live: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}, tuned: tuned}
	t.Cleanup(func() { g.stopped.Store(true); debug.SetGCPercent(old) })
	g.tune()
	if pct := <-tuned; pct <= 100 {
		t.Fatalf("first GOGC %d, want above 100 for a 16 GiB floor", pct)
	}
	debug.SetGCPercent(100)
	deadline := time.After(10 * time.Second)
	for {
		runtime.GC() // frees the sentinel; its cleanup retunes
		select {
		case pct := <-tuned:
			if got := debug.SetGCPercent(old); got != pct || pct <= 100 {
				t.Errorf("GOGC after a collection = %d (tuner set %d), want above 100", got, pct)
			}
			return
		case <-deadline:
			t.Fatal("no retune after collections")
		default:
		}
	}
}

// runtime.memory_limit_mib sets the runtime's soft memory limit; 0 leaves
// it alone.
func TestSetMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	setMemoryLimit(0)
	if got := debug.SetMemoryLimit(-1); got != prev {
		t.Errorf("0 changed the limit to %d", got)
	}
	setMemoryLimit(1100)
	if got := debug.SetMemoryLimit(-1); got != 1100<<20 {
		t.Errorf("limit %d, want %d", got, 1100<<20)
	}
}
