package main

import (
	"sync"
	"time"
)

// load measures the work of the test service: RPCs in flight, completed
// and failed. Its zero value is not usable; see newLoad.
type load struct {
	mu       sync.Mutex
	since    time.Time     // start of the current period
	last     time.Time     // time of the last change, in the current period
	inFlight int           // RPCs being served
	busy     time.Duration // sum over the RPCs in flight of their time in flight since the last sample
	calls    int           // RPCs completed since the last sample
	errs     int           // of which failed
}

// sample is the load of the time between two samples.
type sample struct {
	Concurrency float64 // average RPCs in flight, >= 0
	QPS         float64 // RPCs completed per second, >= 0
	EPS         float64 // RPCs failed per second, >= 0
}

func newLoad(now time.Time) *load { return &load{since: now, last: now} }

// begin records an RPC that starts at now.
func (l *load) begin(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.advance(now)
	l.inFlight++
}

// end records the end at now of an RPC begun earlier; failed tells
// whether it returned an error.
func (l *load) end(now time.Time, failed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.advance(now)
	l.inFlight--
	l.calls++
	if failed {
		l.errs++
	}
}

// sample returns the load since the previous sample (or newLoad) and starts
// a new period at now.
func (l *load) sample(now time.Time) sample {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.advance(now)
	secs := now.Sub(l.since).Seconds()
	var s sample
	if secs > 0 {
		s = sample{Concurrency: l.busy.Seconds() / secs, QPS: float64(l.calls) / secs, EPS: float64(l.errs) / secs}
	}
	l.busy, l.calls, l.errs = 0, 0, 0
	l.since = now
	return s
}

// advance accounts the time from l.last to now to the RPCs in flight.
// l.mu must be held.
func (l *load) advance(now time.Time) {
	if d := now.Sub(l.last); d > 0 {
		l.busy += time.Duration(l.inFlight) * d
		l.last = now
	}
}
