package main

import (
	"context"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A garbage collection that starts during an xDS push slows it: its mark
// phase takes a quarter of the processors and makes the streams that
// allocate help it, so every node's response waits. At 10,000 nodes on
// two cores, the changes of the benchmark (issue 29) that met a
// collection took 1.5-2x as long as the others. pushCollector moves that
// collection into the quiet after a push: once no pass is under way and
// the streams had a moment to write, it collects when one and a half
// times what a recent push allocated (the pass and its streams' writes)
// would reach the point where Go starts a collection itself. That point
// is not published: the runtime starts between 70% and 95% of the way
// from the live heap to its goal, so 70% is assumed.
//
// Collecting early costs collections: at most a third more, because it
// only acts for pushes whose margin (one and a half of them) is at most
// a quarter of the runway from the live heap to that point, so it
// collects with at least three quarters of the runway used. Larger
// pushes (a full push, or frequent weight passes that rebuild every
// node's snapshot) meet collections anyway, and collecting before each
// of them starved three replicas sharing two cores: a replica then
// collected after nearly every pass, and the benchmark's change p99 went
// from 1.5 s to 14.5 s.

// Defaults of the push collector.
const (
	// pushQuiet is how long after a pass's last response was handed to
	// its stream the collector waits for the streams to write it (and
	// for a following pass, which defers it).
	pushQuiet = 100 * time.Millisecond
	// pushMinAlloc: pushes allocating less are too small for a
	// collection during them to matter.
	pushMinAlloc = 4 << 20
	// pushesRemembered is how many pushes' allocations the collector
	// takes the largest of.
	pushesRemembered = 4
)

// heapState is what the collector and the releaser (gc_release.go)
// read of the runtime.
type heapState struct {
	allocated uint64 // bytes allocated since the process started
	goal      uint64 // the heap goal of the current cycle
	live      uint64 // the heap the last collection marked live
	inUse     uint64 // the heap in use by objects now (live, or dead and not yet swept)
	free      uint64 // free heap pages kept resident (not returned to the system)
}

// trigger is the earliest heap at which Go starts a collection by
// itself: 70% of the way from the live heap to the goal.
func (h heapState) trigger() uint64 {
	if h.goal <= h.live {
		return h.goal
	}
	return h.live + (h.goal-h.live)*7/10
}

// shouldCollect reports whether a collection is due before the next
// push: the heap in use plus one and a half pushes reaches the trigger,
// and that margin is at most a quarter of the runway from the live heap
// to the trigger (so that the next push fits after the collection, and
// collections come at most a third more often).
func shouldCollect(h heapState, push uint64) bool {
	margin, trigger := push+push/2, h.trigger()
	if push < pushMinAlloc || trigger <= h.live || margin > (trigger-h.live)/4 {
		return false
	}
	return h.inUse+margin >= trigger
}

// pushCollector implements xds.PassObserver.
type pushCollector struct {
	quiet   time.Duration
	heap    func() heapState // runtime/metrics; tests inject
	collect func()           // runtime.GC; tests inject
	total   prometheus.Counter

	mu     sync.Mutex
	idle   bool   // no pass started since the last look
	since  uint64 // bytes allocated when the first pass after the last look started
	allocs [pushesRemembered]uint64
	next   int

	latest   atomic.Uint64 // the last pass started
	finished atomic.Uint64 // the last pass done
	done     chan struct{} // a pass done (buffered: one wakes the collector)
}

func newPushCollector(reg prometheus.Registerer) *pushCollector {
	c := &pushCollector{quiet: pushQuiet, heap: readHeap, collect: runtime.GC, idle: true, done: make(chan struct{}, 1),
		total: prometheus.NewCounter(prometheus.CounterOpts{Name: "xds_gc_between_pushes_total",
			Help: "garbage collections started in the quiet after an xDS push, so that the next push does not start one (runtime.gc_between_pushes)"})}
	if reg != nil {
		reg.MustRegister(c.total)
	}
	return c
}

// PassStarted notes the start of pass seq: the first since the collector
// last looked starts the push it measures.
func (c *pushCollector) PassStarted(seq uint64) {
	c.mu.Lock()
	if c.idle {
		c.idle, c.since = false, c.heap().allocated
	}
	c.mu.Unlock()
	c.latest.Store(seq)
}

// PassDone wakes the collector.
func (c *pushCollector) PassDone(seq uint64, _ int) {
	for {
		f := c.finished.Load()
		if f >= seq || c.finished.CompareAndSwap(f, seq) {
			break
		}
	}
	select {
	case c.done <- struct{}{}:
	default: // the collector is awake already
	}
}

// look ends the push measured since the first pass after the last look
// and returns the largest push remembered with the heap now.
func (c *pushCollector) look() (uint64, heapState) {
	h := c.heap()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.idle {
		c.allocs[c.next%pushesRemembered] = h.allocated - c.since
		c.next++
		c.idle = true
	}
	return slices.Max(c.allocs[:]), h
}

// run collects after pushes until ctx ends.
func (c *pushCollector) run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.done:
		}
		t.Reset(c.quiet)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if c.latest.Load() != c.finished.Load() { // a pass is under way: its end decides
			continue
		}
		if push, h := c.look(); shouldCollect(h, push) {
			c.total.Inc()
			c.collect()
		}
	}
}

// readHeap reads heapState from runtime/metrics.
func readHeap() heapState {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/goal:bytes"}, {Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	return heapState{allocated: v(0), goal: v(1), live: v(2), inUse: v(3), free: v(4)}
}
