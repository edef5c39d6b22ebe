package ratelimit

import (
	"math"
	"strconv"
	"testing"
	"time"
)

func TestDemandTracksOnlyKeysWithClasses(t *testing.T) {
	d := newDemand(1000)
	const s = int64(time.Second)
	t0 := fixtureStart.UnixNano()
	for i := range 10 {
		if got, tracked := d.add("k", Second, Critical, 1, t0+int64(i)); got != 0 || tracked {
			t.Fatalf("CRITICAL-only traffic: above = %v, want 0", got)
		}
	}
	if n := d.size.Load(); n != 0 {
		t.Fatalf("%d keys tracked for CRITICAL-only traffic", n)
	}
	d.add("k", Second, Sheddable, 1, t0) // starts tracking at t0
	for i := range 40 {                  // 40 CRITICAL_PLUS hits over the first half second
		d.add("k", Second, CriticalPlus, 1, t0+int64(i)*s/80)
	}
	mid := t0 + s/2
	if got, _ := d.add("k", Second, Sheddable, 1, mid); math.Abs(got-80) > 0.01 {
		t.Errorf("half a second in, 40 CRITICAL_PLUS hits: above SHEDDABLE = %v, want 80 per second", got)
	}
	if got, _ := d.add("k", Second, CriticalPlus, 0, mid); got != 0 {
		t.Errorf("above CRITICAL_PLUS = %v, want 0", got)
	}
	// A period later the first period's hits weigh by the share of it
	// still in the window: at 1.75 s, 40 * 0.25 = 10 (the key is a
	// period old, so no more scaling up).
	if got, _ := d.add("k", Second, Sheddable, 0, t0+7*s/4); math.Abs(got-10) > 0.01 {
		t.Errorf("at 1.75 s: above = %v, want 10", got)
	}
	if got, _ := d.add("k", Second, Sheddable, 0, t0+4*s); got != 0 {
		t.Errorf("two idle periods later: above = %v, want 0", got)
	}
	d.add("k", Second, CriticalPlus, 5, t0+5*s)
	if got, _ := d.add("k", Minute, Sheddable, 0, t0+5*s); got != 0 {
		t.Errorf("after the unit changed: above = %v, want 0 (a fresh start)", got)
	}
}

func TestDemandIsBounded(t *testing.T) {
	d := newDemand(64)
	t0 := fixtureStart.UnixNano()
	for i := range 1000 {
		d.add("k"+strconv.Itoa(i), Second, Sheddable, 1, t0+int64(i))
	}
	if n := d.size.Load(); n > 64 || n < 16 {
		t.Errorf("%d keys tracked with a bound of 64", n)
	}
}

func TestReserveAndAdaptiveCap(t *testing.T) {
	t0 := fixtureStart.UnixNano() // a whole second
	s := int64(time.Second)
	for name, tc := range map[string]struct {
		l     Limit
		above float64
		at    int64
		want  float64
	}{
		"fixed, window start":     {Limit{FixedWindow, 100, Second, 0}, 50, t0, 50},
		"fixed, 3/4 in":           {Limit{FixedWindow, 100, Second, 0}, 50, t0 + 3*s/4, 12.5},
		"sliding, start":          {Limit{SlidingWindow, 100, Second, 0}, 50, t0, 50},
		"sliding, a quarter left": {Limit{SlidingLog, 100, Second, 0}, 50, t0 + 9*s/10, 12.5},
		"token bucket":            {Limit{TokenBucket, 100, Second, 20}, 50, t0 + s/2, 10},
		"leaky bucket":            {Limit{LeakyBucket, 10, Minute, 5}, 6, t0, 3},
		"nothing above":           {Limit{FixedWindow, 100, Second, 0}, 0, t0, 0},
	} {
		want := tc.want + 2*math.Sqrt(tc.want) // the expected count and two Poisson deviations
		if got := reserve(tc.l, tc.above, tc.at); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: reserve = %v, want %v", name, got, want)
		}
	}
	l := Limit{FixedWindow, 100, Second, 0}
	for _, tc := range []struct {
		above float64
		want  uint32
	}{{0, 100}, {16, 76}, {10.2, 83}, {90, 0}, {1000, 0}} { // 16 + 2*4 = 24 kept; 10.2 + 6.39 -> 17
		if got := adaptiveCap(l, tc.above, t0); got != tc.want {
			t.Errorf("adaptiveCap(above %v) = %d, want %d", tc.above, got, tc.want)
		}
	}
}

// A replica that admitted a third of a key's usage reserves for three.
func TestDemandScalesToTheFleet(t *testing.T) {
	d := newDemand(1000)
	t0 := fixtureStart.UnixNano()
	l := Limit{FixedWindow, 1000, Second, 0}
	d.add("k", Second, CriticalPlus, 10, t0) // 10 CRITICAL_PLUS hits
	for i := range 10 {
		d.observe("k", l, 1, uint64(3*(i+1)), t0) // the store's usage grows 3 per hit admitted here
	}
	if got, _ := d.add("k", Second, Sheddable, 0, t0+int64(time.Second)/2); math.Abs(got-3*20) > 1e-9 {
		t.Errorf("above = %v, want 60: 10 hits in half a second, 20 per second, times 3", got)
	}
	d.observe("k", Limit{TokenBucket, 1000, Second, 10}, 100, 1, t0) // buckets keep the scale
	if got, _ := d.add("k", Second, Sheddable, 0, t0+int64(time.Second)/2); math.Abs(got-60) > 1e-9 {
		t.Errorf("after a bucket's usage: above = %v, want 60 still", got)
	}
}
