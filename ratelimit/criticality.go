package ratelimit

import (
	"errors"
	"fmt"
	"math"
)

// Criticality is a request's class (the SRE book, ch. 21), lowest first.
type Criticality uint8

// Criticalities. A request without a criticality entry, or with an
// unknown value, is Critical.
const (
	Sheddable Criticality = iota
	SheddablePlus
	Critical
	CriticalPlus
	numCriticalities
)

var criticalityNames = [numCriticalities]string{"SHEDDABLE", "SHEDDABLE_PLUS", "CRITICAL", "CRITICAL_PLUS"}

// DefaultCriticalityKey is the descriptor entry key that carries the
// criticality.
const DefaultCriticalityKey = "criticality"

// String returns the class name (SHEDDABLE, ..., CRITICAL_PLUS).
func (c Criticality) String() string {
	if c < numCriticalities {
		return criticalityNames[c]
	}
	return fmt.Sprintf("criticality(%d)", uint8(c))
}

// ParseCriticality maps a descriptor value to its class; ok is false for
// an unknown value, which is Critical. Names are matched exactly
// (upper-case), as gRPC's and the SRE book's.
func ParseCriticality(s string) (c Criticality, ok bool) {
	for i, n := range criticalityNames {
		if n == s {
			return Criticality(i), true
		}
	}
	return Critical, false
}

// parseCriticalityName is ParseCriticality for configuration keys, which
// may also be lower-case (sheddable_plus).
func parseCriticalityName(s string) (Criticality, bool) {
	b := []byte(s)
	for i, ch := range b {
		if 'a' <= ch && ch <= 'z' {
			b[i] = ch - 'a' + 'A'
		}
	}
	c, ok := ParseCriticality(string(b))
	return c, ok
}

// Shares are the admission shares of each class, indexed by Criticality:
// a request of class c is admitted only while the usage of its bucket,
// with its own hits, stays within Shares[c] of the bucket's capacity. Each
// share is in [0, 1] and no class has a smaller share than a lower one, so
// a class is refused only once every lower class already is: the gaps are
// headroom reserved for the classes above.
type Shares [numCriticalities]float64

// DefaultShares: SHEDDABLE may fill 70% of a limit, SHEDDABLE_PLUS 80%,
// CRITICAL 90% and CRITICAL_PLUS all of it. Under overload a fixed window
// fills to 70% with everyone admitted, then the sheddable classes are
// refused and the last 10% are CRITICAL_PLUS's alone. That keeps
// CRITICAL_PLUS whole as long as its own demand in the part of a window
// left after CRITICAL is shut fits in that 10% (e.g. 10% of a 2x
// overload's traffic); raise the reserve for larger CRITICAL_PLUS shares.
var DefaultShares = Shares{0.7, 0.8, 0.9, 1.0}

// Validate checks every share is in [0, 1] and none decreases with
// criticality.
func (s Shares) Validate() error {
	var errs []error
	for c, v := range s {
		if math.IsNaN(v) || v < 0 || v > 1 {
			errs = append(errs, fmt.Errorf("share of %s %v not in [0, 1]", Criticality(c), v))
		}
		if c > 0 && v < s[c-1] {
			errs = append(errs, fmt.Errorf("share of %s %v is below the share of %s %v",
				Criticality(c), v, Criticality(c-1), s[c-1]))
		}
	}
	return errors.Join(errs...)
}

// Admission is a rule's criticality settings: per-class shares of its
// capacity and, optionally, absolute per-class caps (Limits[c] > 0
// replaces Shares[c] for class c, in requests per unit, or tokens for the
// bucket algorithms).
type Admission struct {
	Shares Shares
	Limits [numCriticalities]uint32
}

// Cap is the admission cap of class c for a bucket of the given capacity,
// in requests: min(Limits[c], capacity) when set, otherwise Shares[c] *
// capacity rounded to the nearest request, at least 1 when the share is
// positive; never above the cap of a higher class (which matters only
// when a request's limit override shrinks the capacity). A nil Admission
// admits every class up to the capacity.
func (a *Admission) Cap(c Criticality, capacity uint32) uint32 {
	if a == nil || c >= numCriticalities {
		return capacity
	}
	v := capacity
	for x := int(numCriticalities) - 1; x >= int(c); x-- {
		v = min(v, a.rawCap(Criticality(x), capacity))
	}
	return v
}

// rawCap is class c's own cap, before the higher classes bound it.
func (a *Admission) rawCap(c Criticality, capacity uint32) uint32 {
	if l := a.Limits[c]; l > 0 {
		return min(l, capacity)
	}
	s := a.Shares[c]
	if s <= 0 {
		return 0
	}
	v := uint32(math.Round(s * float64(capacity)))
	return min(max(v, 1), capacity)
}

// validate checks the shares and that the resulting caps for capacity do
// not decrease with criticality.
func (a *Admission) validate(capacity uint32) error {
	if err := a.Shares.Validate(); err != nil {
		return err
	}
	var errs []error
	for c := Sheddable; c < numCriticalities; c++ {
		if l := a.Limits[c]; l > capacity {
			errs = append(errs, fmt.Errorf("limit of %s %d exceeds the capacity %d", c, l, capacity))
		}
		if c > 0 && a.rawCap(c, capacity) < a.rawCap(c-1, capacity) {
			errs = append(errs, fmt.Errorf("cap of %s %d is below the cap of %s %d",
				c, a.rawCap(c, capacity), c-1, a.rawCap(c-1, capacity)))
		}
	}
	return errors.Join(errs...)
}
