package netlimit_test

import (
	"slices"
	"testing"

	"github.com/xds-server/xds-server/netlimit"
)

func TestFit(t *testing.T) {
	defaults := func() []netlimit.Share {
		return []netlimit.Share{{Name: "xds", Max: 20000, Auto: true}, {Name: "ratelimit", Max: 5000, Auto: true}, {Name: "admin", Max: 512, Auto: true}}
	}
	explicit := func(xds int) []netlimit.Share {
		s := defaults()
		s[0].Max, s[0].Auto = xds, false
		return s
	}
	for name, tc := range map[string]struct {
		limit  uint64
		shares []netlimit.Share
		want   []int
		fits   bool
	}{
		"a large limit keeps the ceilings": {1 << 20, defaults(), []int{20000, 5000, 512}, true},
		// 20,000 (this machine's limit): 5,000 reserved, 15,000 shared.
		"20,000 files: lowered in proportion": {20000, defaults(), []int{11750, 2942, 307}, true},
		"1,024 files: half reserved":          {1024, defaults(), []int{380, 106, 25}, true},
		"unknown limit keeps the ceilings":    {0, defaults(), []int{20000, 5000, 512}, true},
		"an explicit cap is kept, the rest share what it leaves": {20000, explicit(10000),
			[]int{10000, 4534, 465}, true},
		"explicit caps over the budget do not fit; the others keep 16": {20000, explicit(19000), []int{19000, 16, 16}, false},
		"no cap does not fit": {20000, explicit(0), []int{0, 5000, 512}, false},
	} {
		t.Run(name, func(t *testing.T) {
			got, fits := netlimit.Fit(tc.limit, tc.shares)
			if !slices.Equal(got, tc.want) || fits != tc.fits {
				t.Errorf("Fit(%d) = %v, %v; want %v, %v", tc.limit, got, fits, tc.want, tc.fits)
			}
			sum := uint64(0)
			for _, c := range got {
				sum += uint64(c)
			}
			if tc.fits && tc.limit > 0 && sum+netlimit.Reserve(tc.limit) > tc.limit {
				t.Errorf("caps %v + reserve %d exceed the limit %d", got, netlimit.Reserve(tc.limit), tc.limit)
			}
		})
	}
}

// FuzzFit: whatever the limit and the caps, explicit caps are kept,
// automatic ones stay within [min(ceiling, 16), ceiling], and caps that
// fit leave the reserve free.
func FuzzFit(f *testing.F) {
	f.Add(uint64(20000), uint32(20000), true, uint32(5000), true, uint32(512), true)
	f.Add(uint64(1024), uint32(0), false, uint32(5000), true, uint32(3), true)
	f.Add(uint64(1<<20), uint32(100), false, uint32(5000), false, uint32(512), true)
	f.Add(^uint64(0), uint32(1<<32-1), true, uint32(1<<32-1), true, uint32(1<<32-1), false)
	f.Fuzz(func(t *testing.T, limit uint64, a uint32, aAuto bool, b uint32, bAuto bool, c uint32, cAuto bool) {
		shares := []netlimit.Share{{Max: int(a), Auto: aAuto && a > 0}, {Max: int(b), Auto: bAuto && b > 0}, {Max: int(c), Auto: cAuto && c > 0}}
		caps, fits := netlimit.Fit(limit, shares)
		var sum uint64
		for i, s := range shares {
			switch {
			case !s.Auto && caps[i] != s.Max:
				t.Fatalf("explicit cap %d became %d", s.Max, caps[i])
			case s.Auto && (caps[i] > s.Max || caps[i] < min(s.Max, 16)):
				t.Fatalf("automatic cap of ceiling %d became %d", s.Max, caps[i])
			}
			sum += uint64(caps[i])
		}
		if l := min(limit, 1<<40); fits && l > 0 && sum+netlimit.Reserve(l) > l {
			t.Fatalf("Fit(%d, %+v) = %v fits, but leaves less than the reserve %d", limit, shares, caps, netlimit.Reserve(limit))
		}
	})
}
