package envoy

import (
	"errors"
	"math"
	"math/bits"
)

// maxWeightSum is the largest sum of EDS weights sent in one list (the
// endpoints of a locality, or the localities of a priority). EDS requires
// these sums to stay below 2^32-1; grpc-go NACKs a sum above 2^32-1.
const maxWeightSum = math.MaxUint32 - 1

// fitWeights returns ws as EDS weights: every result is >= 1 and their sum
// is at most maxWeightSum. Inputs below 1 count as 1. The sum of the inputs
// must fit in 64 bits; it does for every caller here, whose inputs are
// uint32 weights or sums of them over fewer than 2^32 endpoints.
//
// When the (raised) inputs already fit, they are returned unchanged.
// Otherwise every weight w becomes max(1, floor(w * T / S)), where S is the
// sum of the inputs and T = maxWeightSum - len(ws): proportional scaling
// rounded down, with a reserve of one unit per weight for the raises of
// results that round to 0, so the sum is at most T + len(ws) = maxWeightSum.
// A list longer than maxWeightSum cannot fit and is an error.
func fitWeights(ws []uint64) ([]uint32, error) {
	if uint64(len(ws)) > maxWeightSum {
		return nil, errors.New("envoy: more weights than fit in a sum below 2^32-1")
	}
	var sum uint64
	for _, w := range ws {
		sum += max(w, 1)
	}
	out := make([]uint32, len(ws))
	if sum <= maxWeightSum {
		for i, w := range ws {
			out[i] = uint32(max(w, 1))
		}
		return out, nil
	}
	target := maxWeightSum - uint64(len(ws))
	for i, w := range ws {
		// w <= sum, so w*target/sum <= target: the quotient fits, and
		// Div64 does not panic because hi < sum.
		hi, lo := bits.Mul64(max(w, 1), target)
		q, _ := bits.Div64(hi, lo, sum)
		out[i] = uint32(max(q, 1))
	}
	return out, nil
}
