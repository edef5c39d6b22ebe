package weights

import (
	"errors"
	"fmt"
	"math"
)

const (
	// MaxEndpoints bounds the endpoints of one service (one locality), so
	// that every one can have weight >= 1 with a sum under 2^32-1 and a
	// useful resolution.
	MaxEndpoints = 1 << 20
	// scaleMin is the integer the smallest weight maps to when the sum
	// allows: rounding then moves no weight by more than 1 unit in 100.
	scaleMin = 100
	// maxSum is the largest sum of integer weights Scale produces: EDS
	// requires the sum per locality to stay below 2^32-1.
	maxSum = math.MaxUint32 - 1
)

// ErrInvalidWeights is wrapped by the errors of Scale.
var ErrInvalidWeights = errors.New("weights: invalid weights")

// Scale turns positive float weights (any unit) into EDS integer weights:
//
//   - every weight is >= 1;
//   - weights below max(w)/maxRatio are first raised to it, so the largest
//     integer weight is at most maxRatio times the smallest;
//   - the sum is at most 2^32-2;
//   - the smallest weight maps to 100 when the sum allows (it does unless
//     len(w) * maxRatio * 100 approaches 2^32), and each integer is within 1
//     of its exact scaled value: proportions are kept to 1% (to 0.5% where
//     the maxRatio cap does not bind on rounding).
//
// maxRatio is in [1, 1e6]; w has at most MaxEndpoints finite weights > 0.
// An empty w gives an empty result.
func Scale(w []float64, maxRatio float64) ([]uint32, error) {
	if err := validateMaxRatio(maxRatio); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidWeights, err)
	}
	if len(w) > MaxEndpoints {
		return nil, fmt.Errorf("%w: %d weights (at most %d)", ErrInvalidWeights, len(w), MaxEndpoints)
	}
	for i, v := range w {
		if !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: weight %d is %v (want a finite number > 0)", ErrInvalidWeights, i, v)
		}
	}
	out := make([]uint32, len(w))
	scaleInto(out, w, maxRatio)
	return out, nil
}

// scaleInto is Scale without validation: dst and w have the same length,
// maxRatio is valid, and w holds finite numbers >= 0. Zeros are raised to
// the floor like any small weight; if no weight is > 0, all get 1.
func scaleInto(dst []uint32, w []float64, maxRatio float64) {
	wmax := 0.0
	for _, v := range w {
		wmax = max(wmax, v)
	}
	if !(wmax > 0) {
		for i := range dst {
			dst[i] = 1
		}
		return
	}
	floor := 1 / maxRatio
	// v = max(w/wmax, floor) is in [floor, 1]: no overflow below.
	sum, vmin := 0.0, 1.0
	for _, x := range w {
		v := max(x/wmax, floor)
		sum += v
		vmin = min(vmin, v)
	}
	s := scaleMin / vmin
	if lim := (maxSum - float64(len(w))) / sum; s > lim {
		s = lim // each integer is at most s*v + 1, so the sum stays <= maxSum
	}
	lowest := uint32(math.MaxUint32)
	for i, x := range w {
		n := uint32(max(1, math.Round(s*max(x/wmax, floor))))
		dst[i] = n
		lowest = min(lowest, n)
	}
	// Rounding may push the largest just past maxRatio times the smallest.
	top := uint32(math.Floor(maxRatio * float64(lowest)))
	for i, n := range dst {
		dst[i] = min(n, top)
	}
}
