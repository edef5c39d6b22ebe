package ratelimit

import (
	"math"
	"strconv"
	"testing"
	"time"
)

func TestUnits(t *testing.T) {
	for name, want := range map[string]int64{
		"second": 1, "MINUTE": 60, "Hour": 3600, "day": 86400, "week": 604800, "month": 2592000, "year": 31536000,
	} {
		u, err := ParseUnit(name)
		if err != nil {
			t.Fatalf("ParseUnit(%q): %v", name, err)
		}
		if u.Seconds() != want || u.Duration() != time.Duration(want)*time.Second || !u.Valid() {
			t.Errorf("%s: %d seconds, want %d", name, u.Seconds(), want)
		}
		if got := unitSecondsOf(protoUnit(u)); got != want {
			t.Errorf("%s: %d seconds through the proto unit, want %d", name, got, want)
		}
	}
	if _, err := ParseUnit("fortnight"); err == nil {
		t.Error("ParseUnit(fortnight) succeeded")
	}
	if UnitUnknown.Valid() || UnitUnknown.Seconds() != 0 || Unit(42).String() != "unit(42)" || Minute.String() != "minute" {
		t.Error("invalid units misbehave")
	}
}

func TestLimitString(t *testing.T) {
	for want, l := range map[string]Limit{
		"10/second":                    {FixedWindow, 10, Second, 0},
		"5/minute sliding_log":         {SlidingLog, 5, Minute, 0},
		"1/hour token_bucket burst 20": {TokenBucket, 1, Hour, 20},
		"3/day leaky_bucket burst 1":   {LeakyBucket, 3, Day, 1},
		"7/week algorithm(9)":          {Algorithm(9), 7, Week, 0},
	} {
		if got := l.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
	if _, err := ParseAlgorithm("magic"); err == nil {
		t.Error("ParseAlgorithm(magic) succeeded")
	}
	if Criticality(9).String() != "criticality(9)" || CriticalPlus.String() != "CRITICAL_PLUS" {
		t.Error("criticality names")
	}
}

// Huge bursts on long units saturate instead of overflowing.
func TestBucketSaturates(t *testing.T) {
	var st State
	l := Limit{TokenBucket, 1, Year, math.MaxUint32}
	for range 3 {
		r := Decide(&st, t0, Check{Limit: l, Cap: math.MaxUint32, Hits: math.MaxUint32})
		if r.Reset < 0 || r.Exhausted < 0 {
			t.Fatalf("negative durations: %+v", r)
		}
	}
	if st.Start < t0.UnixNano() || st.Start > t0.UnixNano()+2*maxSpan {
		t.Errorf("TAT %d out of range", st.Start)
	}
}

// YAML anchors, aliases and merge keys are followed.
func TestLoadYAMLAnchors(t *testing.T) {
	c := mustLoad(t, `
domain: d
descriptors:
  - key: a
    rate_limit: &per_second {unit: second, requests_per_unit: 5}
  - key: b
    rate_limit:
      <<: *per_second
      requests_per_unit: 7
  - key: c
    rate_limit: *per_second
`)
	want := map[string]uint32{"d.a": 5, "d.b": 7, "d.c": 5}
	for _, r := range c.Rules() {
		if r.Limit.Requests != want[r.Key] || r.Limit.Unit != Second {
			t.Errorf("%s: %v, want %d/second", r.Key, r.Limit, want[r.Key])
		}
	}
}

// Inserting keys sweeps expired ones even in a shard that is not full.
func TestMemorySweeps(t *testing.T) {
	m, _ := NewMemory(MemoryConfig{Shards: 1, MaxKeys: 1 << 20})
	sec := Limit{FixedWindow, 10, Second, 0}
	for i := range 200 {
		decideOne(t, m, t0, Check{Key: "old" + strconv.Itoa(i), Limit: sec, Cap: 10, Hits: 1})
	}
	later := t0.Add(time.Hour)
	for i := range 20 * sweepEvery {
		decideOne(t, m, later, Check{Key: "new" + strconv.Itoa(i), Limit: sec, Cap: 10, Hits: 1})
	}
	if n := m.Len(); n >= 200+20*sweepEvery {
		t.Errorf("%d keys: no expired key was swept", n)
	}
}
