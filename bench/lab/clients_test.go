package main

import (
	"math"
	"testing"
	"time"
)

// TestArrivalsReproducibleAndAtRate: the same seed and client give the
// same gaps, another client others, and the mean gap is 1/rate.
func TestArrivalsReproducibleAndAtRate(t *testing.T) {
	const n, rate = 20000, 40.0
	a, b, other := newArrivals(7, 3, rate), newArrivals(7, 3, rate), newArrivals(7, 4, rate)
	var sum time.Duration
	same, differ := true, false
	for range n {
		x, y, z := a.next(), b.next(), other.next()
		same = same && x == y
		differ = differ || x != z
		sum += x
	}
	if !same || !differ {
		t.Errorf("same seed and client give the same gaps: %v; another client others: %v", same, differ)
	}
	if got := float64(n) / sum.Seconds(); math.Abs(got-rate) > 0.03*rate {
		t.Errorf("rate %.2f/s, want %.0f/s +- 3%%", got, rate)
	}
}
