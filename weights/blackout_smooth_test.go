package weights

import (
	"math"
	"testing"
	"time"
)

// TestBlackoutForgetsFirstMeasurement is the load lab's failure through
// real Envoys: an example backend's first ORCA report said 28 requests/s
// at utilization 0.000017, a weight and capacity of 1.6 million for a
// backend of about 171. Seeded with it, the average (smoothing 0.5) only
// halved the excess per report: 3,353 when the blackout ended, 1,760 as
// the first own weight, and the per-node solver sent the backend's nodes
// 1.47 times its capacity. The blackout is the time to forget such a
// first measurement: its end starts from the measurements of then.
func TestBlackoutForgetsFirstMeasurement(t *testing.T) {
	tr := newTestTracker(t, nil, "a", "b") // default blackout 10s, smoothing 0.5
	observe(t, tr, t0, load("a", t0, 28, 0, 0.000017), load("b", t0, 60, 0, 0.35))
	tr.Update(t0)
	var row Row
	for s := 1; s <= 12; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		observe(t, tr, now, load("a", now, 60, 0, 0.35), load("b", now, 60, 0, 0.35))
		row = rowOf(t, tr.Update(now), "a")
		if s == 11 && row.Reason != ReasonReported {
			t.Fatalf("at %ds: reason %s, want reported (blackout over)", s, row.Reason)
		}
	}
	want := 60 / 0.35
	if math.Abs(row.Float/want-1) > 0.05 || math.Abs(row.Capacity/want-1) > 0.05 {
		t.Errorf("after the blackout: weight %.0f, capacity %.0f; want about %.0f, the measurements of the last 10 s", row.Float, row.Capacity, want)
	}
	b := rowOf(t, tr.Update(t0.Add(12*time.Second)), "b")
	if math.Abs(b.Float/want-1) > 0.05 {
		t.Errorf("b: weight %.0f, want about %.0f", b.Float, want)
	}
}
