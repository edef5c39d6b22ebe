package main

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A burst of allocation (a connect storm of thousands of nodes, a full
// push) leaves the heap with as much garbage and free memory as live
// data, and Go keeps it resident: its next collection only comes when
// the heap grows to twice the burst's live peak, which a quiet server may
// not reach for minutes, and its scavenger returns free pages slowly and
// only above that goal. At 10,000 xDS nodes a connect storm left 150-225
// MiB so held beside 230-290 MiB of live heap (issue 29). memReleaser
// watches the heap and, once the process has been quiet for a moment,
// collects and returns every free page at once (debug.FreeOSMemory).
// Only a large surplus counts (releaseMin, and a quarter of the live heap),
// and releases are at least releaseGap apart, so a server that
// allocates steadily, or a small one, never pays for it.
//
// A release does not move the next collection: the collection it runs
// would otherwise set the next one at twice the live heap, sooner than
// the burst's goal, and the pushes that follow would meet it (at 10,000
// nodes, the second full push after a storm took 1.5 CPU-s against 0.8-1.2
// without the release). So for one cycle GOGC is set to keep the goal
// the heap had before the release (holdGoal); the memory comes back only
// as the heap grows into it, as it would have.

// Defaults of the releaser.
const (
	releaseEvery = 250 * time.Millisecond // how often the heap is read
	releaseQuiet = 2 << 20                // at most this allocated per read: quiet
	releaseReads = 2                      // quiet reads in a row before a release
	releaseMin   = 64 << 20               // the least surplus worth a release
	releaseGap   = 30 * time.Second       // the least time between two releases
)

// surplus is what a collection and a release would return: the garbage
// and the free pages.
func (h heapState) surplus() uint64 {
	garbage := uint64(0)
	if h.inUse > h.live {
		garbage = h.inUse - h.live
	}
	return h.free + garbage
}

// releaseDue reports whether cur, read after prev, is a quiet moment with
// a surplus worth returning: at most releaseQuiet allocated in between,
// and at least releaseMin and a quarter of the live heap to return.
func releaseDue(prev, cur heapState) bool {
	if cur.allocated-prev.allocated > releaseQuiet {
		return false
	}
	s := cur.surplus()
	return s >= releaseMin && s >= cur.live/4
}

// memReleaser implements runtime.release_free_memory.
type memReleaser struct {
	read     func() heapState  // readHeap; tests inject
	release  func()            // debug.FreeOSMemory; tests inject
	hold     func(goal uint64) // holdGoal; tests inject
	now      func() time.Time
	releases prometheus.Counter
	bytes    prometheus.Counter
}

func newMemReleaser(reg prometheus.Registerer) *memReleaser {
	r := &memReleaser{read: readHeap, release: debug.FreeOSMemory, hold: holdGoal, now: time.Now,
		releases: prometheus.NewCounter(prometheus.CounterOpts{Name: "xds_memory_releases_total",
			Help: "times the process returned a burst's garbage and free heap to the system once quiet (runtime.release_free_memory)"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "xds_memory_released_bytes_total",
			Help: "heap bytes (garbage and free pages) those releases returned, as read just before each"})}
	if reg != nil {
		reg.MustRegister(r.releases, r.bytes)
	}
	return r
}

// run reads the heap every releaseEvery until ctx ends.
func (r *memReleaser) run(ctx context.Context) {
	t := time.NewTicker(releaseEvery)
	defer t.Stop()
	r.loop(ctx, t.C)
}

// loop releases on the reads that ticks start: after releaseReads quiet
// reads in a row with a surplus, and releaseGap after the last release.
func (r *memReleaser) loop(ctx context.Context, ticks <-chan time.Time) {
	prev, quiet := r.read(), 0
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		cur := r.read()
		if releaseDue(prev, cur) {
			quiet++
		} else {
			quiet = 0
		}
		prev = cur
		if quiet < releaseReads || (!last.IsZero() && r.now().Sub(last) < releaseGap) {
			continue
		}
		r.release()
		r.hold(cur.goal)
		last, quiet = r.now(), 0
		r.releases.Inc()
		r.bytes.Add(float64(cur.surplus()))
		prev = r.read() // the release's own collection allocated
	}
}

// gcHeld is set while holdGoal holds GOGC: the heap floor's tuner
// (gc.go) leaves it alone meanwhile.
var gcHeld atomic.Bool

// holdGoal sets GOGC so that the next collection comes at goal bytes of
// heap, as it would have before the release's collection, and restores
// GOGC after that collection. Nothing is held when Go's pacing (twice the
// live heap now) already puts it there or later, or while a hold is on.
func holdGoal(goal uint64) {
	gcMu.Lock()
	defer gcMu.Unlock()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return
	}
	now := s[1].Value.Uint64()
	if now > 1<<30 { // GOGC=off
		return
	}
	pct, ok := heldPercent(goal, s[0].Value.Uint64(), int(now))
	if !ok || !gcHeld.CompareAndSwap(false, true) {
		return
	}
	prev := debug.SetGCPercent(pct)
	runtime.AddCleanup(new(gcSentinel), func(prev int) {
		gcMu.Lock()
		defer gcMu.Unlock()
		debug.SetGCPercent(prev)
		gcHeld.Store(false)
	}, prev)
}

// heldPercent is the GOGC that puts the next collection at goal with
// live bytes of live heap, when that is later than now (GOGC now) puts
// it; ok is false, and pct is now, when it is not.
func heldPercent(goal, live uint64, now int) (pct int, ok bool) {
	if live == 0 || goal <= live {
		return now, false
	}
	p := int(min((goal-live)*100/live, 1<<20))
	if p <= now {
		return now, false
	}
	return p, true
}
