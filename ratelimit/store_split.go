package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// PartialError is the error of a Store's Decide that decided some of its
// checks and not others: Failed[i] reports that check i was not decided
// (the service answers it per its failure mode); the Results of the
// others are valid. Err is why.
type PartialError struct {
	Failed []bool
	Err    error
}

func (e *PartialError) Error() string { return e.Err.Error() }
func (e *PartialError) Unwrap() error { return e.Err }

// Split is the Store of envoyproxy/ratelimit's REDIS_PERSECOND: checks of
// limits per second go to PerSecond, every other unit to Main, so that
// the hottest counters do not share a Redis with the long windows. A
// Decide call asks both stores at once (each only for its own checks)
// and merges their results in the order of the checks. A store that
// fails fails only its checks: the error is then a *PartialError (a
// plain error when every check failed).
type Split struct {
	Main, PerSecond Store
}

// NewSplit returns a Split over main and perSecond.
func NewSplit(main, perSecond Store) *Split { return &Split{Main: main, PerSecond: perSecond} }

// Decide implements Store.
func (s *Split) Decide(ctx context.Context, now time.Time, checks []Check) ([]Result, error) {
	perSecond := 0
	for _, c := range checks {
		if perSecondCheck(c) {
			perSecond++
		}
	}
	switch perSecond { // all on one side: no copy, no goroutine, no merge
	case 0:
		return s.Main.Decide(ctx, now, checks)
	case len(checks):
		return s.PerSecond.Decide(ctx, now, checks)
	}
	main, sec := make([]Check, 0, len(checks)-perSecond), make([]Check, 0, perSecond)
	mainAt, secAt := make([]int, 0, len(checks)-perSecond), make([]int, 0, perSecond)
	for i, c := range checks {
		if perSecondCheck(c) {
			sec, secAt = append(sec, c), append(secAt, i)
		} else {
			main, mainAt = append(main, c), append(mainAt, i)
		}
	}
	var secRes []Result
	var secErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		secRes, secErr = decideN(ctx, s.PerSecond, now, sec)
	}()
	mainRes, mainErr := decideN(ctx, s.Main, now, main)
	wg.Wait()
	res, failed := make([]Result, len(checks)), make([]bool, len(checks))
	merge := func(at []int, r []Result, err error) {
		for j, i := range at {
			if err != nil {
				failed[i] = partFailed(err, j)
			} else {
				res[i] = r[j]
			}
			if failed[i] {
				res[i] = Result{}
			}
		}
	}
	merge(mainAt, mainRes, mainErr)
	merge(secAt, secRes, secErr)
	if mainErr == nil && secErr == nil {
		return res, nil
	}
	err := errors.Join(storeErr("main", mainErr), storeErr("per-second", secErr))
	if mainErr != nil && secErr != nil && allFailed(failed) {
		return nil, err
	}
	return res, &PartialError{Failed: failed, Err: err}
}

// perSecondCheck reports whether c goes to the per-second store (an
// invalid unit is a second, as Decide takes it).
func perSecondCheck(c Check) bool { return normalize(c).Limit.Unit == Second }

// decideN is st.Decide, its results checked against the checks' number.
func decideN(ctx context.Context, st Store, now time.Time, checks []Check) ([]Result, error) {
	res, err := st.Decide(ctx, now, checks)
	var pe *PartialError
	if err == nil && len(res) != len(checks) || errors.As(err, &pe) && (len(res) != len(checks) || len(pe.Failed) != len(checks)) {
		return nil, fmt.Errorf("ratelimit: store returned %d results for %d checks", len(res), len(checks))
	}
	return res, err
}

// partFailed reports whether check j failed with err, the error of its
// store's Decide.
func partFailed(err error, j int) bool {
	var pe *PartialError
	if errors.As(err, &pe) {
		return pe.Failed[j]
	}
	return true
}

func allFailed(failed []bool) bool {
	for _, f := range failed {
		if !f {
			return false
		}
	}
	return true
}

func storeErr(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s store: %w", name, err)
}

// Describe implements prometheus.Collector: the metrics of Main and
// PerSecond (a Redis's with the label store="main" or "per_second").
func (s *Split) Describe(ch chan<- *prometheus.Desc) {
	s.each(func(st Store, d *redisDescs) {
		if d != nil {
			d.describe(ch)
		} else if c, ok := st.(prometheus.Collector); ok {
			c.Describe(ch)
		}
	})
}

// Collect implements prometheus.Collector.
func (s *Split) Collect(ch chan<- prometheus.Metric) {
	s.each(func(st Store, d *redisDescs) {
		if r, ok := st.(*Redis); ok {
			r.collect(ch, d)
		} else if c, ok := st.(prometheus.Collector); ok {
			c.Collect(ch)
		}
	})
}

// each calls f for Main and PerSecond, with the labelled descriptions of
// a Redis (nil for other stores).
func (s *Split) each(f func(Store, *redisDescs)) {
	for _, p := range []struct {
		st Store
		d  *redisDescs
	}{{s.Main, splitMainDescs}, {s.PerSecond, splitPerSecondDescs}} {
		if _, ok := p.st.(*Redis); !ok {
			p.d = nil
		}
		f(p.st, p.d)
	}
}
