package ratelimit

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed redis.lua
var redisLua string

// redisScript decides the checks of one call; see redis.lua for its
// arguments and reply.
var redisScript = redis.NewScript(redisLua)

const (
	redisArgsPerCheck = 8 // at most, the name included
	// redisTTLGrace is added to every key's TTL, so that replicas whose
	// clocks are a little apart do not lose each other's usage.
	redisTTLGrace = time.Second
	nsDigits      = 19 // of a Unix time in ns, zero-padded, until 2286
)

// encode returns the Redis key of c (normalized) and args with its script
// arguments appended; "" and args unchanged when c needs no state (a
// bucket of zero requests or burst refuses everything).
func (r *Redis) encode(args []any, now time.Time, c Check) (string, []any) {
	t := now.UnixNano()
	u := c.Limit.Unit.Seconds() * int64(time.Second)
	switch c.Limit.Algorithm {
	case SlidingWindow:
		ws := t - floorMod(t, u)
		return r.prefix + c.Key + ":sw", append(args, "w", c.Hits, c.Cap, ws/int64(time.Second), u/int64(time.Second),
			formatFloat(float64(u-(t-ws))), formatFloat(float64(u)), ceilMillis(ws+2*u-t))
	case SlidingLog:
		return r.prefix + c.Key + ":sl", append(args, "l", c.Hits, c.Cap, c.Limit.Requests,
			nsString(t), nsString(t-u), ceilMillis(u))
	case TokenBucket, LeakyBucket:
		if c.Limit.Requests == 0 || c.Limit.Burst == 0 {
			return "", args
		}
		T := (u + int64(c.Limit.Requests) - 1) / int64(c.Limit.Requests)
		h, k := mulSpan(int64(c.Hits), T), mulSpan(int64(c.Cap), T)
		ok, suffix := "0", ":tb"
		if c.Hits <= c.Cap {
			ok = "1"
		}
		if c.Limit.Algorithm == LeakyBucket {
			suffix = ":lb"
		}
		const sec = int64(time.Second)
		return r.prefix + c.Key + suffix, append(args, "g", ok, now.Unix(), now.Nanosecond(), h/sec, h%sec, k/sec, k%sec)
	default:
		s, us := now.Unix(), c.Limit.Unit.Seconds()
		end := (s - floorMod(s, us) + us) * int64(time.Second)
		return r.prefix + FixedWindowKey(c.Key, now, c.Limit.Unit),
			append(args, "f", c.Hits, c.Cap, c.Limit.Requests, ceilMillis(end-t))
	}
}

// replyLen is how many values redis.lua replies for a check of algorithm
// a (the state it keeps).
func replyLen(a Algorithm) int {
	switch a {
	case SlidingWindow:
		return 3
	case SlidingLog:
		return 4
	case TokenBucket, LeakyBucket:
		return 2
	default:
		return 1
	}
}

// decodeResult turns the state of c's key before the check (v, as
// redis.lua replies it) into c's result, with Decide's arithmetic: the
// script made the same decision.
func decodeResult(now time.Time, c Check, v []any) (Result, error) {
	if c.Limit.Algorithm == SlidingLog {
		return logResult(now, c, v)
	}
	var n [3]int64
	for i := range min(len(v), len(n)) {
		var err error
		if n[i], err = replyInt(v[i]); err != nil {
			return Result{}, err
		}
	}
	st := State{Algorithm: c.Limit.Algorithm}
	switch c.Limit.Algorithm {
	case SlidingWindow:
		st.Start, st.Count, st.Prev = n[0]*int64(time.Second), uint64(n[1]), uint64(n[2])
	case TokenBucket, LeakyBucket:
		st.Start = n[0]*int64(time.Second) + n[1]
	default:
		s, us := now.Unix(), c.Limit.Unit.Seconds()
		st.Start, st.Count = (s-floorMod(s, us))*int64(time.Second), uint64(n[0])
	}
	return Decide(&st, now, c), nil
}

// logResult is slidingLog's result from what the script replies: the
// entries in the window (in), the last one, and the entries whose
// leaving the window would admit the check (e1) or a hit of any class
// (e2), in ns.
func logResult(now time.Time, c Check, v []any) (Result, error) {
	var n [4]int64
	for i := range n {
		var err error
		if n[i], err = replyInt(v[i]); err != nil {
			return Result{}, err
		}
	}
	in, last, e1, e2 := n[0], n[1], n[2], n[3]
	t, u := now.UnixNano(), c.Limit.Unit.Seconds()*int64(time.Second)
	hits, k := int64(c.Hits), int64(c.Cap)
	if in+hits <= k {
		var reset int64
		switch {
		case hits > 0 && in > 0:
			reset = max(t, last) + u - t
		case hits > 0:
			reset = u
		case in > 0:
			reset = last + u - t
		}
		return Result{Allowed: true, Remaining: uint32(k - in - hits), Reset: time.Duration(reset), Used: uint64(in + hits)}, nil
	}
	wait := func(d, entry int64) time.Duration {
		if d > in {
			return time.Duration(u)
		}
		return time.Duration(max(entry+u-t, 0))
	}
	r := Result{Reset: wait(in+hits-k, e1), Used: uint64(in)}
	if capacity := int64(c.Limit.Requests); in+1 > capacity {
		r.Exhausted = max(wait(in+1-capacity, e2), 1)
	}
	return r, nil
}

// replyInt reads an integer of the script's reply ("" is 0).
func replyInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		if x == "" {
			return 0, nil
		}
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, fmt.Errorf("unexpected %T in the reply", v)
}

// nsString is a Unix time in ns as the script compares it: 19 digits,
// zero-padded (times before 1970 count as 1970).
func nsString(t int64) string {
	s := strconv.FormatInt(max(t, 0), 10)
	return strings.Repeat("0", max(nsDigits-len(s), 0)) + s
}

// ceilMillis is d ns in ms, rounded up.
func ceilMillis(d int64) int64 { return (d + int64(time.Millisecond) - 1) / int64(time.Millisecond) }

// formatFloat formats f so that Lua's tonumber reads it back exactly.
func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
