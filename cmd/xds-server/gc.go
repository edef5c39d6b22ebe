package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// setHeapFloor makes the garbage collector let the heap grow to mib MiB
// before it collects, or to twice the live heap when that is more (Go's
// default pacing, GOGC=100). A small process serving many short requests
// (the rate-limit service allocates about 10 KiB per call in gRPC)
// otherwise collects tens of times a second, and each collection also
// shrinks the stacks its request goroutines must grow again; a large one
// (thousands of xDS nodes) keeps Go's pacing, so garbage does not pile up
// in resident memory. After every collection GOGC is set from the live
// heap that collection found. 0 leaves the collector alone.
func setHeapFloor(mib uint32) {
	if mib == 0 {
		return
	}
	t := &gcTuner{floor: uint64(mib) << 20, live: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.tune()
}

// gcTuner sets GOGC after every collection until stopped.
type gcTuner struct {
	floor   uint64
	live    []metrics.Sample
	stopped atomic.Bool
	tuned   chan<- int // tests: each GOGC set, if not nil
}

// gcMu orders the writers of GOGC: the tuner's reading of gcHeld and
// its setting, against a release's hold and its restore (gc_release.go),
// which run on other goroutines (cleanups run concurrently).
var gcMu sync.Mutex

// gcSentinel is garbage from birth: its cleanup runs after the next
// collection. It holds a pointer, so the tiny allocator never batches it
// with other objects.
type gcSentinel struct{ _ *int }

// tune sets GOGC for the live heap of the last collection and arms itself
// for the next one.
func (t *gcTuner) tune() {
	if t.stopped.Load() {
		return
	}
	gcMu.Lock()
	if gcHeld.Load() { // a memory release holds GOGC for a cycle (gc_release.go)
		gcMu.Unlock()
		runtime.AddCleanup(new(gcSentinel), func(t *gcTuner) { t.tune() }, t)
		return
	}
	metrics.Read(t.live)
	var live uint64
	if t.live[0].Value.Kind() == metrics.KindUint64 {
		live = t.live[0].Value.Uint64()
	}
	pct := gcPercent(live, t.floor)
	debug.SetGCPercent(pct)
	gcMu.Unlock()
	runtime.AddCleanup(new(gcSentinel), func(t *gcTuner) { t.tune() }, t)
	if t.tuned != nil {
		t.tuned <- pct
	}
}

// gcPercent is the GOGC that puts the next collection at floor bytes, or
// at twice live when that is more. A live heap below 4 MiB (none before
// the first collection) counts as 4 MiB, the heap Go's pacing starts from.
func gcPercent(live, floor uint64) int {
	const maxPercent = 1 << 20
	live = max(live, 4<<20)
	if 2*live >= floor {
		return 100
	}
	return int(min(floor*100/live-100, maxPercent))
}

// setMemoryLimit sets the runtime's soft memory limit to mib MiB (what
// GOMEMLIMIT sets); 0 leaves it alone.
func setMemoryLimit(mib uint32) {
	if mib > 0 {
		debug.SetMemoryLimit(int64(mib) << 20)
	}
}
