package main

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
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

// Defaults of the releaser.
const (
	releaseEvery = 250 * time.Millisecond // how often the heap is read
	releaseQuiet = 2 << 20                // at most this allocated per read: quiet
	releaseReads = 2                      // quiet reads in a row before a release
	releaseMin   = 64 << 20               // the least surplus worth a release
	releaseGap   = 30 * time.Second       // the least time between two releases
)

// heapMem is what the releaser reads of the runtime.
type heapMem struct {
	allocated uint64 // bytes allocated since the process started
	live      uint64 // the heap the last collection marked live
	objects   uint64 // the heap in objects: live, or dead and not yet collected
	free      uint64 // free heap pages kept resident (not returned)
}

// surplus is what a collection and a release would return: the garbage
// and the free pages.
func (h heapMem) surplus() uint64 {
	garbage := uint64(0)
	if h.objects > h.live {
		garbage = h.objects - h.live
	}
	return h.free + garbage
}

// releaseDue reports whether cur, read after prev, is a quiet moment with
// a surplus worth returning: at most releaseQuiet allocated in between,
// and at least releaseMin and a quarter of the live heap to return.
func releaseDue(prev, cur heapMem) bool {
	if cur.allocated-prev.allocated > releaseQuiet {
		return false
	}
	s := cur.surplus()
	return s >= releaseMin && s >= cur.live/4
}

// memReleaser implements runtime.release_free_memory.
type memReleaser struct {
	read     func() heapMem // runtime/metrics; tests inject
	release  func()         // debug.FreeOSMemory; tests inject
	now      func() time.Time
	releases prometheus.Counter
	bytes    prometheus.Counter
}

func newMemReleaser(reg prometheus.Registerer) *memReleaser {
	r := &memReleaser{read: readHeapMem, release: debug.FreeOSMemory, now: time.Now,
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
		last, quiet = r.now(), 0
		r.releases.Inc()
		r.bytes.Add(float64(cur.surplus()))
		prev = r.read() // the release's own collection allocated
	}
}

// readHeapMem reads heapMem from runtime/metrics.
func readHeapMem() heapMem {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	return heapMem{allocated: v(0), live: v(1), objects: v(2), free: v(3)}
}
