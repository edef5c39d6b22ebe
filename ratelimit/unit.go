package ratelimit

import (
	"fmt"
	"strings"
	"time"
)

// Unit is the period of a limit: requests_per_unit per Unit.
type Unit uint8

// Units, as envoyproxy/ratelimit accepts them (the names of
// envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit). A month is
// 30 days and a year 365 days, as there.
const (
	UnitUnknown Unit = iota
	Second
	Minute
	Hour
	Day
	Week
	Month
	Year
)

var unitNames = [...]string{"unknown", "second", "minute", "hour", "day", "week", "month", "year"}

// unitSeconds are the window lengths in seconds (envoyproxy/ratelimit's
// UnitToDivider).
var unitSeconds = [...]int64{0, 1, 60, 3600, 86400, 7 * 86400, 30 * 86400, 365 * 86400}

// String returns the unit's lower-case name.
func (u Unit) String() string {
	if int(u) < len(unitNames) {
		return unitNames[u]
	}
	return fmt.Sprintf("unit(%d)", uint8(u))
}

// Valid reports whether u is one of Second..Year.
func (u Unit) Valid() bool { return u >= Second && u <= Year }

// Seconds is the unit's length in seconds; 0 for an invalid unit.
func (u Unit) Seconds() int64 {
	if !u.Valid() {
		return 0
	}
	return unitSeconds[u]
}

// Duration is the unit's length.
func (u Unit) Duration() time.Duration { return time.Duration(u.Seconds()) * time.Second }

// ParseUnit parses a unit name, ignoring case as envoyproxy/ratelimit does
// ("second", "MINUTE", ...).
func ParseUnit(s string) (Unit, error) {
	l := strings.ToLower(s)
	for u := Second; u <= Year; u++ {
		if unitNames[u] == l {
			return u, nil
		}
	}
	return UnitUnknown, fmt.Errorf("invalid unit %q (want second, minute, hour, day, week, month or year)", s)
}

// Algorithm is how a limit is enforced.
type Algorithm uint8

// Algorithms. FixedWindow is the default and gives envoyproxy/ratelimit's
// answers; see the package documentation for each one's semantics.
const (
	FixedWindow Algorithm = iota
	SlidingWindow
	SlidingLog
	TokenBucket
	LeakyBucket
)

var algorithmNames = [...]string{"fixed_window", "sliding_window", "sliding_log", "token_bucket", "leaky_bucket"}

// String returns the algorithm's configuration name (fixed_window, ...).
func (a Algorithm) String() string {
	if int(a) < len(algorithmNames) {
		return algorithmNames[a]
	}
	return fmt.Sprintf("algorithm(%d)", uint8(a))
}

// Valid reports whether a is one of the five algorithms.
func (a Algorithm) Valid() bool { return int(a) < len(algorithmNames) }

// bucket reports whether a is a bucket algorithm (capacity Burst rather
// than Requests).
func (a Algorithm) bucket() bool { return a == TokenBucket || a == LeakyBucket }

// ParseAlgorithm parses an algorithm's configuration name; "" is
// FixedWindow.
func ParseAlgorithm(s string) (Algorithm, error) {
	if s == "" {
		return FixedWindow, nil
	}
	for a, n := range algorithmNames {
		if n == s {
			return Algorithm(a), nil
		}
	}
	return FixedWindow, fmt.Errorf("invalid algorithm %q (want %s)", s, strings.Join(algorithmNames[:], ", "))
}

// Limit is a resolved limit: what a Store needs to enforce it.
type Limit struct {
	Algorithm Algorithm
	// Requests is the number of requests allowed per Unit (0 refuses all).
	Requests uint32
	Unit     Unit
	// Burst is the bucket capacity of TokenBucket and LeakyBucket, in
	// requests (>= 1 once resolved); ignored by the window algorithms.
	Burst uint32
}

// Capacity is the most usage the limit holds at once, in requests: Burst
// for the bucket algorithms, Requests for the window algorithms.
func (l Limit) Capacity() uint32 {
	if l.Algorithm.bucket() {
		return l.Burst
	}
	return l.Requests
}

// String formats the limit as "10/second" (with the algorithm when it is
// not the default, and the burst of a bucket).
func (l Limit) String() string {
	s := fmt.Sprintf("%d/%s", l.Requests, l.Unit)
	switch {
	case l.Algorithm.bucket():
		s += fmt.Sprintf(" %s burst %d", l.Algorithm, l.Burst)
	case l.Algorithm != FixedWindow:
		s += " " + l.Algorithm.String()
	}
	return s
}

// defaultBurst is the burst of a bucket limit without one: Requests for
// the token bucket (a full unit's worth), 1 for the leaky bucket (strict
// pacing at Requests per Unit).
func defaultBurst(a Algorithm, requests uint32) uint32 {
	switch a {
	case TokenBucket:
		return max(requests, 1)
	case LeakyBucket:
		return 1
	}
	return 0
}
