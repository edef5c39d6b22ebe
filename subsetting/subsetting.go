package subsetting

import (
	"errors"
	"fmt"
	"slices"
)

// Algorithm names a subsetting algorithm.
type Algorithm string

const (
	// Classic is the SRE book's deterministic subsetting, bit for bit.
	Classic Algorithm = "classic"
	// Steady is the low-churn algorithm (the default): Ringsteady over
	// stable endpoint slots (NewSlotted), or consistent hash rings (New).
	Steady Algorithm = "steady"
	// Random gives each client a seeded random shuffle, as the SRE book's
	// random subsetting does. It is a baseline for the simulator only: it is
	// neither balanced nor stable.
	Random Algorithm = "random"
)

// ParseAlgorithm accepts "classic" and "steady" ("" means steady); anything
// else is an error naming the valid values. "random" is accepted too, for the
// simulator; do not configure it in production.
func ParseAlgorithm(s string) (Algorithm, error) {
	switch Algorithm(s) {
	case "", Steady:
		return Steady, nil
	case Classic:
		return Classic, nil
	case Random:
		return Random, nil
	}
	return "", fmt.Errorf("subsetting: unknown algorithm %q (valid: %s, %s)", s, Steady, Classic)
}

// Plan is the subset layout of one backend list for one subset size. It is
// immutable after New (its caches are internally synchronized): safe for
// concurrent use by many goroutines.
type Plan interface {
	// Order appends to dst the first n backends of client's preference
	// order, as indices into Backends(), and returns the extended slice.
	// The first Size() of them are the client's subset; the rest are its
	// replacement candidates in order (used when subset members are not
	// serving). n is clamped to the number of backends; a client < 0 or an
	// n <= 0 appends nothing.
	Order(dst []int, client, n int) []int
	// Backends returns the canonical (sorted, deduplicated) backend list the
	// indices refer to. The caller must not modify it.
	Backends() []string
	// Size is the effective subset size: min(size, len(Backends())).
	Size() int
}

// ErrSize is returned by New for a subset size below 1.
var ErrSize = errors.New("subsetting: subset size must be at least 1")

// New builds the plan for backends (in any order; duplicates are removed and
// the list is sorted by id inside) and subset size (>= 1; a size of at least
// len(backends) gives every client all backends, in its own order). An empty
// backend list gives a plan whose Order appends nothing.
func New(alg Algorithm, backends []string, size int) (Plan, error) {
	if size < 1 {
		return nil, fmt.Errorf("%w (got %d)", ErrSize, size)
	}
	ids := canonical(backends)
	k := min(size, len(ids))
	switch alg {
	case Classic:
		return newClassic(ids, k), nil
	case Steady, "":
		return newSteady(ids, k), nil
	case Random:
		return newRandom(ids, k), nil
	}
	_, err := ParseAlgorithm(string(alg))
	return nil, err
}

// canonical returns a sorted, deduplicated copy of ids.
func canonical(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

// clampN bounds a requested order length to [0, backends].
func clampN(n, backends int) int {
	return max(0, min(n, backends))
}
