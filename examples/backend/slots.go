package main

import (
	"context"
	"time"

	"google.golang.org/grpc/status"
)

// slots models a backend's capacity without burning CPU: n concurrent
// slots, each call holding one for the service time (plus its x-delay-ms);
// calls beyond n wait in arrival order (a Go channel wakes blocked senders
// first in, first out). The capacity is n / service time calls per second.
// busy measures the slot time in use, so the utilization reported is what
// the backend measures (busy slot-time over n x wall time), never a
// configured number.
type slots struct {
	sem         chan struct{} // one token per slot in use; cap n >= 1
	serviceTime time.Duration // > 0
	busy        *load         // a call begins when it takes a slot and ends when it gives it back
}

// newSlots returns n slots of serviceTime each, measured from now.
func newSlots(n int, serviceTime time.Duration, now time.Time) *slots {
	return &slots{sem: make(chan struct{}, n), serviceTime: serviceTime, busy: newLoad(now)}
}

// hold waits for a free slot (queueing), holds it for the service time
// plus extra, and gives it back. It returns the context's status error if
// the call ends first.
func (s *slots) hold(ctx context.Context, extra time.Duration) error {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
	s.busy.begin(time.Now())
	timer := time.NewTimer(s.serviceTime + extra)
	defer func() {
		timer.Stop()
		<-s.sem
	}()
	select {
	case <-timer.C:
		s.busy.end(time.Now(), false)
		return nil
	case <-ctx.Done():
		s.busy.end(time.Now(), true)
		return status.FromContextError(ctx.Err()).Err()
	}
}

// utilization is the share of slot time in use in a sample of busy, in
// [0, 1].
func (s *slots) utilization(busy sample) float64 {
	return min(1, busy.Concurrency/float64(cap(s.sem)))
}
