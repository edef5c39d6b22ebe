package weights

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*Config)
		want []string // substrings of the error; none means valid
	}{
		"defaults":               {edit: func(*Config) {}},
		"no blackout":            {edit: func(c *Config) { c.BlackoutPeriod = 0 }},
		"no smoothing":           {edit: func(c *Config) { c.Smoothing = 1 }},
		"marks equal":            {edit: func(c *Config) { c.OverloadRecover = c.OverloadThreshold }},
		"ratio one":              {edit: func(c *Config) { c.MaxRatio = 1 }},
		"negative penalty":       {edit: func(c *Config) { c.Penalty = -1 }, want: []string{"penalty -1"}},
		"NaN penalty":            {edit: func(c *Config) { c.Penalty = math.NaN() }, want: []string{"penalty NaN"}},
		"negative blackout":      {edit: func(c *Config) { c.BlackoutPeriod = -time.Second }, want: []string{"blackout period -1s"}},
		"zero expiration":        {edit: func(c *Config) { c.ExpirationPeriod = 0 }, want: []string{"expiration period 0s"}},
		"zero smoothing":         {edit: func(c *Config) { c.Smoothing = 0 }, want: []string{"smoothing 0 not in (0, 1]"}},
		"smoothing above one":    {edit: func(c *Config) { c.Smoothing = 1.5 }, want: []string{"smoothing 1.5"}},
		"recover above overload": {edit: func(c *Config) { c.OverloadRecover = 0.95 }, want: []string{"recover mark 0.95"}},
		"zero threshold":         {edit: func(c *Config) { c.OverloadThreshold = 0 }, want: []string{"overload threshold 0"}},
		"factor one":             {edit: func(c *Config) { c.OverloadFactor = 1 }, want: []string{"overload factor 1"}},
		"zero overload period":   {edit: func(c *Config) { c.OverloadPeriod = 0 }, want: []string{"overload period 0s"}},
		"period past expiration": {edit: func(c *Config) { c.OverloadPeriod = time.Hour }, want: []string{"overload period 1h0m0s not in (0, expiration period 3m0s]"}},
		"ratio below one":        {edit: func(c *Config) { c.MaxRatio = 0.5 }, want: []string{"max ratio 0.5"}},
		"ratio too large":        {edit: func(c *Config) { c.MaxRatio = 1e7 }, want: []string{"max ratio 1e+07"}},
		"zero value": {
			edit: func(c *Config) { *c = Config{} },
			want: []string{"expiration period", "smoothing", "overload threshold", "overload factor", "overload period", "max ratio"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			checkErr(t, c.Validate(), ErrInvalidConfig, tc.want)
			if _, err := NewTracker(c); (err == nil) != (len(tc.want) == 0) {
				t.Fatalf("NewTracker: %v", err)
			}
		})
	}
}

func TestSolveConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*SolveConfig)
		want []string
	}{
		"defaults":          {edit: func(*SolveConfig) {}},
		"no damping":        {edit: func(c *SolveConfig) { c.Damping = 1 }},
		"zero damping":      {edit: func(c *SolveConfig) { c.Damping = 0 }, want: []string{"damping 0"}},
		"zero sweeps":       {edit: func(c *SolveConfig) { c.MaxSweeps = 0 }, want: []string{"max sweeps 0"}},
		"tolerance one":     {edit: func(c *SolveConfig) { c.Tolerance = 1 }, want: []string{"tolerance 1"}},
		"NaN ratio":         {edit: func(c *SolveConfig) { c.MaxRatio = math.NaN() }, want: []string{"max ratio NaN"}},
		"all wrong at once": {edit: func(c *SolveConfig) { *c = SolveConfig{} }, want: []string{"damping", "max ratio", "max sweeps", "tolerance"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := DefaultSolveConfig()
			tc.edit(&c)
			checkErr(t, c.Validate(), ErrInvalidConfig, tc.want)
			_, err := Solve(Problem{}, c)
			checkErr(t, err, ErrInvalidConfig, tc.want)
		})
	}
}

// checkErr fails unless err is nil when want is empty, or else wraps
// target and mentions every string of want (and has the weights: prefix).
func checkErr(t *testing.T, err, target error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("error %v, want none", err)
		}
		return
	}
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want one wrapping %v", err, target)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	if !strings.HasPrefix(err.Error(), "weights: ") {
		t.Errorf("error %q lacks the weights: prefix", err)
	}
}
