package ratelimit

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Check is one decision asked of a Store: add Hits to the usage of Key
// under Limit if the usage stays within Cap.
type Check struct {
	// Key identifies the bucket: envoyproxy/ratelimit's cache key without
	// its window start, "domain_key1_value1_key2_value2_" (see StoreKey).
	// Stores add what their algorithm needs (FixedWindowKey for the
	// window).
	Key   string
	Limit Limit
	// Cap is the admission cap of the request's class, in requests (tokens
	// for the bucket algorithms), at most Limit.Capacity(); see
	// Admission.Cap. Without criticality it is the capacity.
	Cap uint32
	// Hits is the number of hits to add; 0 checks without incrementing.
	Hits uint32
}

// Result is a Store's decision on one Check.
type Result struct {
	// Allowed: the hits were admitted (and counted).
	Allowed bool
	// Remaining is how many more hits the check's class could add now (0
	// when refused).
	Remaining uint32
	// Reset: when refused, the time until the same check would be
	// admitted (one unit when it never can: Hits above Cap); when
	// admitted, the time until the whole limit is available again. Fixed
	// windows report the time to the window's end in whole seconds, as
	// envoyproxy/ratelimit does.
	Reset time.Duration
	// Exhausted, when positive, is a time during which no hit of any class
	// can be admitted (usage is at the capacity): the key may be refused
	// locally until then without asking the store. Set only on refusals.
	Exhausted time.Duration
	// Used is the usage after the decision, in requests (tokens for the
	// bucket algorithms), rounded up; for near-limit accounting.
	Used uint64
}

// State is the state a store keeps for one key. Its fields mean, per
// algorithm (all times in Unix nanoseconds):
//
//	fixed_window:   Start = window start (a whole multiple of the unit in seconds), Count = hits counted in it
//	sliding_window: Start = current window start, Count = its hits, Prev = the previous window's hits
//	sliding_log:    Log = times of the hits admitted in the last unit, oldest first (one element per hit)
//	token_bucket, leaky_bucket: Start = theoretical arrival time (GCRA's TAT)
//
// The zero State is an unused key.
type State struct {
	Algorithm Algorithm
	Start     int64
	Count     uint64
	Prev      uint64
	Log       []int64
}

// maxSpan bounds the bucket algorithms' spans (100 years in ns) so that
// the Unix-time arithmetic cannot overflow int64.
const maxSpan = int64(100 * 365 * 24 * time.Hour)

// Decide applies c to st at now and returns the decision, updating st. A
// state written by another algorithm is discarded. Pure: no clock, no I/O.
func Decide(st *State, now time.Time, c Check) Result {
	if st.Algorithm != c.Limit.Algorithm {
		*st = State{Algorithm: c.Limit.Algorithm}
	}
	if !c.Limit.Unit.Valid() {
		c.Limit.Unit = Second
	}
	c.Cap = min(c.Cap, c.Limit.Capacity())
	switch c.Limit.Algorithm {
	case SlidingWindow:
		return slidingWindow(st, now.UnixNano(), c)
	case SlidingLog:
		return slidingLog(st, now.UnixNano(), c)
	case TokenBucket, LeakyBucket:
		return gcra(st, now.UnixNano(), c)
	default:
		return fixedWindow(st, now, c)
	}
}

// Expiry is the Unix time in ns after which st holds no usage for l: a
// store may forget the key then.
func (st *State) Expiry(l Limit) int64 {
	u := max(l.Unit.Seconds(), 1) * int64(time.Second)
	switch l.Algorithm {
	case SlidingWindow:
		return st.Start + 2*u
	case SlidingLog:
		if len(st.Log) == 0 {
			return 0
		}
		return st.Log[len(st.Log)-1] + u
	case TokenBucket, LeakyBucket:
		return st.Start
	default:
		return st.Start + u
	}
}

// FixedWindowKey is envoyproxy/ratelimit's cache key of a fixed window:
// key followed by the window start in Unix seconds.
func FixedWindowKey(key string, now time.Time, u Unit) string {
	s, d := now.Unix(), max(u.Seconds(), 1)
	var b strings.Builder // one allocation
	b.Grow(len(key) + 20)
	b.WriteString(key)
	var digits [20]byte
	b.Write(strconv.AppendInt(digits[:0], s-floorMod(s, d), 10))
	return b.String()
}

// fixedWindow is envoyproxy/ratelimit's fixed window: the window is
// floor(now/unit) in whole seconds, hits are admitted while the count
// stays within the cap, and hits refused by the full limit are still
// counted (envoyproxy/ratelimit increments before comparing), so a
// window once over its limit stays over it. Reset is in whole seconds
// from the current second, as envoyproxy/ratelimit reports it.
func fixedWindow(st *State, now time.Time, c Check) Result {
	nowS, u := now.Unix(), c.Limit.Unit.Seconds()
	ws := nowS - floorMod(nowS, u)
	if start := ws * int64(time.Second); st.Start != start {
		st.Start, st.Count = start, 0
	}
	reset := time.Duration(ws+u-nowS) * time.Second
	capacity, k := uint64(c.Limit.Requests), uint64(c.Cap)
	after := st.Count + uint64(c.Hits)
	if after <= k {
		st.Count = after
		return Result{Allowed: true, Remaining: uint32(k - after), Reset: reset, Used: after}
	}
	if after > capacity && k >= capacity {
		st.Count = after
	}
	r := Result{Reset: reset, Used: st.Count}
	if st.Count >= capacity { // exact, unlike Reset's whole seconds
		r.Exhausted = time.Duration((ws+u)*int64(time.Second) - now.UnixNano())
	}
	return r
}

// slidingWindow is the sliding window counter: the usage is the previous
// window's count weighted by the part of it still inside a unit-long
// window ending now, plus the current window's count. Refused hits are
// not counted.
func slidingWindow(st *State, t int64, c Check) Result {
	u := c.Limit.Unit.Seconds() * int64(time.Second)
	ws := t - floorMod(t, u)
	switch st.Start {
	case ws:
	case ws - u:
		st.Prev, st.Count = st.Count, 0
	default:
		st.Prev, st.Count = 0, 0
	}
	st.Start = ws
	est := float64(st.Prev)*float64(u-(t-ws))/float64(u) + float64(st.Count)
	n, k := float64(c.Hits), float64(c.Cap)
	if est+n <= k {
		st.Count += uint64(c.Hits)
		reset := ws + u - t
		if st.Count > 0 {
			reset += u
		}
		return Result{Allowed: true, Remaining: uint32(math.Floor(k - est - n)),
			Reset: time.Duration(reset), Used: uint64(math.Ceil(est + n))}
	}
	r := Result{Reset: slidingWait(st, t, u, n, k), Used: uint64(math.Ceil(est))}
	if capacity := float64(c.Limit.Requests); est+1 > capacity {
		r.Exhausted = max(slidingWait(st, t, u, 1, capacity), 1)
	}
	return r
}

// slidingWait is the time from t until n more hits fit under k in a
// sliding window with no further hits; one unit when they never can.
func slidingWait(st *State, t, u int64, n, k float64) time.Duration {
	room := k - n
	if room < 0 {
		return time.Duration(u)
	}
	cur, prev, fu := float64(st.Count), float64(st.Prev), float64(u)
	var at float64 // offset from the current window's start
	switch {
	case cur <= room && prev > 0:
		at = fu - (room-cur)*fu/prev
	case cur <= room:
		return 0
	default: // wait for the current window to become the previous one
		at = fu + fu - room*fu/cur
	}
	return time.Duration(max(int64(math.Ceil(at))-(t-st.Start), 0))
}

// slidingLog keeps the time of every admitted hit of the last unit:
// exact, and at most Cap entries (so at most the limit) per key.
func slidingLog(st *State, t int64, c Check) Result {
	u := c.Limit.Unit.Seconds() * int64(time.Second)
	drop := 0
	for drop < len(st.Log) && st.Log[drop] <= t-u {
		drop++
	}
	st.Log = st.Log[drop:]
	in, n, k := len(st.Log), int(c.Hits), int(c.Cap)
	if in+n <= k {
		at := t
		if in > 0 {
			at = max(at, st.Log[in-1]) // keep the log sorted if time went back
		}
		for range n {
			st.Log = append(st.Log, at)
		}
		reset := int64(0)
		if len(st.Log) > 0 {
			reset = st.Log[len(st.Log)-1] + u - t
		}
		return Result{Allowed: true, Remaining: uint32(k - in - n), Reset: time.Duration(reset), Used: uint64(in + n)}
	}
	r := Result{Reset: logWait(st.Log, t, u, in+n-k), Used: uint64(in)}
	if capacity := int(c.Limit.Requests); in+1 > capacity {
		r.Exhausted = max(logWait(st.Log, t, u, in+1-capacity), 1)
	}
	return r
}

// logWait is the time from t until the oldest d entries have left the
// window; one unit when more than the whole log must leave.
func logWait(log []int64, t, u int64, d int) time.Duration {
	if d > len(log) {
		return time.Duration(u)
	}
	return time.Duration(max(log[d-1]+u-t, 0))
}

// gcra is the generic cell rate algorithm, the common core of the token
// bucket and the leaky bucket (they are the same meter): one request
// costs T = ceil(unit/Requests) ns of "theoretical arrival time" (TAT),
// usage is (TAT - now)/T requests, and hits are admitted while usage
// stays within the cap. The token bucket is GCRA with Burst defaulting to
// Requests, the leaky bucket with Burst defaulting to 1 (strict pacing).
func gcra(st *State, t int64, c Check) Result {
	u := c.Limit.Unit.Seconds() * int64(time.Second)
	if c.Limit.Requests == 0 || c.Limit.Burst == 0 {
		return Result{Reset: time.Duration(u), Exhausted: time.Duration(u)}
	}
	T := (u + int64(c.Limit.Requests) - 1) / int64(c.Limit.Requests)
	tat := max(st.Start, t)
	used := (tat - t + T - 1) / T
	capSpan := mulSpan(int64(c.Limit.Burst), T)
	k := mulSpan(int64(c.Cap), T)
	if c.Hits <= c.Cap {
		if next := tat + mulSpan(int64(c.Hits), T); next-t <= k {
			st.Start = next
			return Result{Allowed: true, Remaining: uint32((k - (next - t)) / T),
				Reset: time.Duration(next - t), Used: uint64((next - t + T - 1) / T)}
		}
	}
	r := Result{Reset: time.Duration(u), Used: uint64(used)}
	if c.Hits <= c.Cap {
		r.Reset = time.Duration(tat + mulSpan(int64(c.Hits), T) - t - k)
	}
	if w := tat + T - t - capSpan; w > 0 {
		r.Exhausted = time.Duration(w)
	}
	return r
}

// mulSpan is a*b for non-negative a and b, saturated at maxSpan.
func mulSpan(a, b int64) int64 {
	if a != 0 && b > maxSpan/a {
		return maxSpan
	}
	return min(a*b, maxSpan)
}

// floorMod is a mod m in [0, m) for m > 0.
func floorMod(a, m int64) int64 {
	r := a % m
	if r < 0 {
		r += m
	}
	return r
}
