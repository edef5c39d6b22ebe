package consulstate

import "time"

// NextIndex applies Consul's blocking-query index rules. prev is the index
// sent with the query (0: none, a non-blocking read) and got is the
// X-Consul-Index returned. It returns the index to send next and whether the
// result must be processed:
//   - got < prev: the index went backwards (e.g. the servers lost their state);
//     the result is processed and the next query is a non-blocking read (0);
//   - got < 1 is treated as 1, so that a bogus 0 never turns into a busy loop;
//   - got == prev: nothing changed (the wait expired); normal, not processed.
func NextIndex(prev, got uint64) (next uint64, changed bool) {
	switch {
	case got < prev:
		return 0, true
	case got < 1:
		got = 1
	}
	return got, prev == 0 || got != prev
}

// Backoff returns the delay before retry number attempt (1 for the first
// retry after an error) with "equal jitter": with d the exponential delay
// base·2^(attempt-1) capped at ceiling, half of d is fixed and half random.
// rnd returns a number in [0, 1) (math/rand/v2.Float64 in production); values
// outside are clamped. The result is in [d/2, d]; 0 when base <= 0. A ceiling
// below base is raised to base.
func Backoff(attempt int, base, ceiling time.Duration, rnd func() float64) time.Duration {
	if base <= 0 {
		return 0
	}
	ceiling = max(ceiling, base)
	d := base
	for i := 1; i < attempt && d < ceiling; i++ {
		if d > ceiling/2 {
			d = ceiling
			break
		}
		d *= 2
	}
	half := d / 2
	r := min(max(rnd(), 0), 1)
	return half + time.Duration(r*float64(d-half))
}
