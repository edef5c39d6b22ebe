package main

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A garbage collection that starts during an xDS push slows it: its mark
// phase takes a quarter of the processors and makes the streams that
// allocate help it, so every node's response waits. At 10,000 nodes on
// two cores, the changes of the benchmark (issue 29) that met a
// collection took 1.5-2x as long as the others, and no other change met
// one. pushCollector moves that collection into the quiet after a push:
// once a pass's responses are all handed to their streams and no pass
// followed for a moment, it collects if the heap's headroom (the
// collector's goal minus the heap in use) is under 1.5 times what a
// recent push allocated, that is when the next push would likely start
// a collection itself. A collection then happens a little before the
// goal instead of at it; nothing else changes.

// Defaults of the push collector.
const (
	// pushQuiet is how long after a pass's last response was handed to
	// its stream the collector waits for the streams to write it (and
	// for a following pass, which defers it).
	pushQuiet = 100 * time.Millisecond
	// pushMinAlloc: passes allocating less are too small for a
	// collection during them to matter.
	pushMinAlloc = 4 << 20
	// pushesRemembered is how many passes' allocations the collector
	// takes the largest of.
	pushesRemembered = 4
)

// shouldCollect reports whether a collection is due before the next
// push: the heap in use plus one and a half pushes reaches the goal.
func shouldCollect(goal, inUse, push uint64) bool {
	return push >= pushMinAlloc && inUse+push+push/2 >= goal
}

// pushCollector implements xds.PassObserver.
type pushCollector struct {
	quiet   time.Duration
	heap    func() (allocated, goal, inUse uint64) // runtime/metrics; tests inject
	collect func()                                 // runtime.GC; tests inject
	total   prometheus.Counter

	mu      sync.Mutex
	started map[uint64]uint64 // pass -> bytes allocated by the process when it started
	allocs  [pushesRemembered]uint64
	next    int

	latest   atomic.Uint64 // the last pass started
	finished atomic.Uint64 // the last pass done
	done     chan struct{} // a pass done (buffered: one wakes the collector)
}

func newPushCollector(reg prometheus.Registerer) *pushCollector {
	c := &pushCollector{quiet: pushQuiet, heap: readHeap, collect: runtime.GC,
		started: map[uint64]uint64{}, done: make(chan struct{}, 1),
		total: prometheus.NewCounter(prometheus.CounterOpts{Name: "xds_gc_between_pushes_total",
			Help: "garbage collections started in the quiet after an xDS push, so that the next push does not start one (runtime.gc_between_pushes)"})}
	if reg != nil {
		reg.MustRegister(c.total)
	}
	return c
}

// PassStarted notes the process's allocation at the start of pass seq.
func (c *pushCollector) PassStarted(seq uint64) {
	allocated, _, _ := c.heap()
	c.mu.Lock()
	if len(c.started) >= 2*pushesRemembered { // passes never done (none should be): forget the oldest
		oldest := seq
		for s := range c.started {
			oldest = min(oldest, s)
		}
		delete(c.started, oldest)
	}
	c.started[seq] = allocated
	c.mu.Unlock()
	c.latest.Store(seq)
}

// PassDone records what pass seq allocated and wakes the collector.
func (c *pushCollector) PassDone(seq uint64, _ int) {
	allocated, _, _ := c.heap()
	c.mu.Lock()
	if from, ok := c.started[seq]; ok {
		delete(c.started, seq)
		c.allocs[c.next%pushesRemembered] = allocated - from
		c.next++
	}
	c.mu.Unlock()
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

// largest is the largest allocation of the remembered passes.
func (c *pushCollector) largest() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(c.allocs[0], c.allocs[1], c.allocs[2], c.allocs[3])
}

// run collects after passes until ctx ends.
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
		if _, goal, inUse := c.heap(); shouldCollect(goal, inUse, c.largest()) {
			c.total.Inc()
			c.collect()
		}
	}
}

// readHeap reads the process's cumulative heap allocation, the
// collector's heap goal and the heap in use by objects (live, or dead
// and not yet swept).
func readHeap() (allocated, goal, inUse uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/goal:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	return v(0), v(1), v(2)
}
