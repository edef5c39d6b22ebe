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
