package main

import (
	"math"
	"testing"
	"time"
)

// TestArrivalsReproducibleAndAtRate: the same seed, run and client give
// the same gaps, another client or another run others, and the mean gap
// is 1/rate.
func TestArrivalsReproducibleAndAtRate(t *testing.T) {
	const n, rate = 20000, 40.0
	a, b := newArrivals(7, 1, 3, rate), newArrivals(7, 1, 3, rate)
	other, otherRun := newArrivals(7, 1, 4, rate), newArrivals(7, 2, 3, rate)
	var sum time.Duration
	same, differ, differRun := true, false, false
	for range n {
		x, y, z, w := a.next(), b.next(), other.next(), otherRun.next()
		same = same && x == y
		differ = differ || x != z
		differRun = differRun || x != w
		sum += x
	}
	if !same || !differ || !differRun {
		t.Errorf("same seed, run and client give the same gaps: %v; another client others: %v; another run others: %v",
			same, differ, differRun)
	}
	if got := float64(n) / sum.Seconds(); math.Abs(got-rate) > 0.03*rate {
		t.Errorf("rate %.2f/s, want %.0f/s +- 3%%", got, rate)
	}
}
