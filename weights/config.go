package weights

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults of Config (see DefaultConfig).
const (
	DefaultPenalty           = 1.0              // gRFC A58's error_utilization_penalty
	DefaultBlackoutPeriod    = 10 * time.Second // gRFC A58's blackout_period
	DefaultExpirationPeriod  = 3 * time.Minute  // gRFC A58's weight_expiration_period
	DefaultSmoothing         = 0.5              // EWMA factor: half of each new measurement
	DefaultOverloadThreshold = 0.9              // utilization above which weight is shed
	DefaultOverloadRecover   = 0.8              // utilization below which it is regained
	DefaultOverloadFactor    = 0.75             // the most weight kept per overloaded period
	DefaultOverloadPeriod    = 5 * time.Second  // the guard moves at most once per this
	DefaultMaxRatio          = 100.0            // max/min integer weight in one service
	DefaultMinChange         = 0.05             // relative share change that warrants a push
)

// ErrInvalidConfig is wrapped by the errors of Config.Validate and
// SolveConfig.Validate.
var ErrInvalidConfig = errors.New("weights: invalid config")

// Config tunes the Tracker. Start from DefaultConfig: a zero field is not a
// default but a value (and often an invalid one).
type Config struct {
	// Penalty is the utilization one error per request costs (gRFC A58's
	// error_utilization_penalty), in [0, 100].
	Penalty float64
	// BlackoutPeriod is how long an endpoint must have reported usable
	// load before its own weight is used (>= 0; 0 disables the blackout).
	// Until then it gets the service's mean weight. The blackout starts
	// again after the endpoint's weight has expired.
	BlackoutPeriod time.Duration
	// ExpirationPeriod is the age (> 0) after which a report no longer
	// counts; an endpoint whose last usable report is older falls back to
	// the service's mean weight.
	ExpirationPeriod time.Duration
	// Smoothing is the EWMA factor in (0, 1] applied once per Update that
	// has seen a new report of the endpoint: smoothed += Smoothing *
	// (measured - smoothed). 1 means no smoothing.
	Smoothing float64
	// OverloadThreshold is the utilization in (0, MaxUtilization] above
	// which the overload guard cuts an endpoint's weight.
	OverloadThreshold float64
	// OverloadRecover is the utilization in (0, OverloadThreshold] below
	// which a cut endpoint regains weight (the hysteresis's lower mark).
	OverloadRecover float64
	// OverloadFactor in (0, 1) bounds one move of the guard: a cut keeps
	// at least this much of the guard (exactly this much when saturated),
	// a gain multiplies it by at most its inverse.
	OverloadFactor float64
	// OverloadPeriod (> 0, at most ExpirationPeriod) is how often at most
	// the guard moves, on the mean utilization measured over the period.
	// It should be at least the push interval (the Runner's
	// MinPushInterval): a move takes that long to reach the clients, and
	// moving again before would cut for load already shed.
	OverloadPeriod time.Duration
	// MaxRatio (>= 1, at most 1e6) bounds the ratio of the largest to the
	// smallest integer weight within one service.
	MaxRatio float64
}

// DefaultConfig returns the defaults above.
func DefaultConfig() Config {
	return Config{
		Penalty:           DefaultPenalty,
		BlackoutPeriod:    DefaultBlackoutPeriod,
		ExpirationPeriod:  DefaultExpirationPeriod,
		Smoothing:         DefaultSmoothing,
		OverloadThreshold: DefaultOverloadThreshold,
		OverloadRecover:   DefaultOverloadRecover,
		OverloadFactor:    DefaultOverloadFactor,
		OverloadPeriod:    DefaultOverloadPeriod,
		MaxRatio:          DefaultMaxRatio,
	}
}

// Validate reports every invalid field at once, wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	var errs []error
	if !inRange(c.Penalty, 0, MaxUtilization) {
		errs = append(errs, fmt.Errorf("penalty %v not in [0, %v]", c.Penalty, MaxUtilization))
	}
	if c.BlackoutPeriod < 0 {
		errs = append(errs, fmt.Errorf("blackout period %v is negative", c.BlackoutPeriod))
	}
	if c.ExpirationPeriod <= 0 {
		errs = append(errs, fmt.Errorf("expiration period %v must be positive", c.ExpirationPeriod))
	}
	if !(c.Smoothing > 0 && c.Smoothing <= 1) {
		errs = append(errs, fmt.Errorf("smoothing %v not in (0, 1]", c.Smoothing))
	}
	if !(c.OverloadThreshold > 0 && c.OverloadThreshold <= MaxUtilization) {
		errs = append(errs, fmt.Errorf("overload threshold %v not in (0, %v]", c.OverloadThreshold, MaxUtilization))
	}
	if !(c.OverloadRecover > 0 && c.OverloadRecover <= c.OverloadThreshold) {
		errs = append(errs, fmt.Errorf("overload recover mark %v not in (0, overload threshold %v]",
			c.OverloadRecover, c.OverloadThreshold))
	}
	if !(c.OverloadFactor > 0 && c.OverloadFactor < 1) {
		errs = append(errs, fmt.Errorf("overload factor %v not in (0, 1)", c.OverloadFactor))
	}
	if c.OverloadPeriod <= 0 || c.OverloadPeriod > c.ExpirationPeriod {
		errs = append(errs, fmt.Errorf("overload period %v not in (0, expiration period %v]", c.OverloadPeriod, c.ExpirationPeriod))
	}
	if err := validateMaxRatio(c.MaxRatio); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
}

// maxMaxRatio bounds MaxRatio so that integer weights keep their
// resolution (scaleMin * ratio fits easily in uint32).
const maxMaxRatio = 1e6

func validateMaxRatio(r float64) error {
	if !inRange(r, 1, maxMaxRatio) {
		return fmt.Errorf("max ratio %v not in [1, %v]", r, maxMaxRatio)
	}
	return nil
}

// inRange reports whether v is a number in [lo, hi].
func inRange(v, lo, hi float64) bool {
	return v >= lo && v <= hi && !math.IsNaN(v)
}
