package netlimit

import "math/bits"

// Share is one listener's claim on the process's open-file limit.
type Share struct {
	Name string
	// Max is the cap the configuration gives (Auto false; 0 there means
	// no cap), or the ceiling of an automatic cap (Auto true).
	Max  int
	Auto bool // lower Max to fit the open-file limit
}

// Reserve is how many of limit open files are kept for everything but
// the listeners' client connections: Consul's blocking queries, Redis
// pools, ORCA streams to backends, configuration and certificate files,
// the Go runtime. A quarter of the limit, and at least 1,024 (half of a
// limit under 2,048).
func Reserve(limit uint64) uint64 {
	return max(limit/4, min(1024, limit/2))
}

// maxLimit bounds the limit Fit reckons with: more is as good as
// unlimited (RLIM_INFINITY is 2^64-1).
const maxLimit = 1 << 40

// mulDiv is a*b/c without overflow, for 0 <= a <= c and b >= 0.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

// minAuto is the least an automatic cap is lowered to (or its ceiling,
// if smaller): a listener keeps a few connections however tight the limit.
const minAuto = 16

// Fit returns the cap of each share, in order: explicit caps as given,
// automatic ones lowered so that all caps together stay within limit -
// Reserve(limit) where they can: each keeps min(ceiling, 16), and the
// rest of the room is split in proportion to what their ceilings ask
// above that. fits is false when the caps do not fit: the explicit caps
// leave too little room, or one is 0 (no cap). A limit of 0 (unknown)
// keeps every ceiling and fits.
func Fit(limit uint64, shares []Share) (caps []int, fits bool) {
	caps = make([]int, len(shares))
	if limit == 0 {
		for i, s := range shares {
			caps[i] = s.Max
		}
		return caps, true
	}
	limit = min(limit, maxLimit)
	budget := int64(limit - Reserve(limit))
	var fixed, ceilings, floors int64
	fits = true
	for _, s := range shares {
		switch {
		case s.Auto:
			ceilings += int64(s.Max)
			floors += int64(min(s.Max, minAuto))
		case s.Max <= 0:
			fits = false
		default:
			fixed += int64(s.Max)
		}
	}
	room := max(budget-fixed, 0)
	var total int64
	for i, s := range shares {
		caps[i] = s.Max
		if s.Auto && ceilings > room {
			floor := int64(min(s.Max, minAuto))
			caps[i] = int(floor)
			if room > floors {
				caps[i] = int(floor + mulDiv(int64(s.Max)-floor, room-floors, ceilings-floors))
			}
		}
		if caps[i] > 0 {
			total += int64(caps[i])
		}
	}
	return caps, fits && total <= budget
}
