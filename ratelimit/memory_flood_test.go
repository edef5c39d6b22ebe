package ratelimit

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// heapInUse is the live heap after a collection, in bytes.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// Regression (issue 14): a flood of distinct 1 KB descriptor values grew
// the memory store without a byte bound (2.17 GB of heap) and, once it
// hit its key bound, evicted live keys: a key at 901/1000 (hourly) showed
// 999 remaining. Now the heap stays under the configured bound and the
// key keeps its usage.
func TestMemoryFloodBounded(t *testing.T) {
	const maxBytes = 16 << 20
	flood := 100_000 // 1 KB values: six times the bound
	if testing.Short() {
		flood = 40_000
	}
	before := heapInUse()
	m, err := NewMemory(MemoryConfig{MaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	hour := Limit{FixedWindow, 1000, Hour, 0}
	victim := Check{Key: "d_user_victim_", Limit: hour, Cap: 1000, Hits: 901}
	if r := decideOne(t, m, t0, victim); !r.Allowed || r.Remaining != 99 {
		t.Fatalf("victim: %+v, want 99 remaining", r)
	}
	value := strings.Repeat("v", 1000)
	now := t0
	for i := range flood {
		now = t0.Add(time.Duration(i) * 400 * time.Microsecond) // 40 s over the flood, as found
		decideOne(t, m, now, Check{Key: "d_user_" + value + strconv.Itoa(i) + "_", Limit: hour, Cap: 1000, Hits: 1})
	}
	heap := heapInUse() - before
	overflow := int64(0) // the sketches count in maxBytes
	t.Logf("%d flood keys: %d keys held, %d bytes accounted, heap %.1f MiB (bound %d MiB + %.1f MiB sketch cells)",
		flood, m.Len(), m.Bytes(), float64(heap)/(1<<20), maxBytes>>20, float64(overflow)/(1<<20))
	if heap > maxBytes+overflow+maxBytes/4 {
		t.Errorf("heap grew %d MiB with the flood, want under the %d MiB bound (+ sketch cells)", heap>>20, maxBytes>>20)
	}
	if b := m.Bytes(); b > maxBytes {
		t.Errorf("%d bytes accounted, want at most %d", b, maxBytes)
	}
	victim.Hits = 0
	if r := decideOne(t, m, now, victim); r.Remaining > 99 {
		t.Errorf("victim after the flood: %d remaining, want at most 99 (its usage was forgotten)", r.Remaining)
	}
	if st := memStatsOf(m); st.evictedCold == 0 {
		t.Errorf("evictions %+v after the flood, want cold ones", st)
	}
	if n := testutil.ToFloat64(collectorFor(m, "ratelimit_memory_keys")); int(n) != m.Len() {
		t.Errorf("ratelimit_memory_keys %v, want %d", n, m.Len())
	}
	runtime.KeepAlive(m)
}

// collectorFor is the one metric of m named name.
func collectorFor(m *Memory, name string) prometheus.Collector {
	return prometheus.CollectorFunc(func(ch chan<- prometheus.Metric) {
		c := make(chan prometheus.Metric, 16)
		m.Collect(c)
		close(c)
		for x := range c {
			if strings.Contains(x.Desc().String(), `"`+name+`"`) {
				ch <- x
			}
		}
	})
}
