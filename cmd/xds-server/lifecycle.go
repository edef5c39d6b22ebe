package main

import (
	"context"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
)

// closers release what serve acquired while wiring (listeners, the client
// index table's session, the rate-limit store, the HA alive check), newest
// first, when serve returns: on a failed step they release everything
// acquired before it. Each is safe to run after the stop of its component
// has released it already (a listener closed twice, a store closed once, an
// alive check that its Run deregistered).
type closers []func()

// push adds f, to run before every closer pushed earlier.
func (c *closers) push(f func()) { *c = append(*c, f) }

// close runs the closers, newest first, and forgets them.
func (c *closers) close() {
	for _, f := range slices.Backward(*c) {
		f()
	}
	*c = nil
}

// lifecycle runs the started components under one run group: background
// loops (until the last stop), servers' accept loops and other runs whose
// error is fatal (the first one ends the run), and the stops that
// shutdown calls in reverse order of start.
type lifecycle struct {
	group    *errgroup.Group
	failed   context.Context // done at the first fatal error; context.Cause is that error
	loops    context.Context // the background loops': cancelled after the last stop
	endLoops context.CancelFunc
	stops    []func(context.Context)
}

func newLifecycle() *lifecycle {
	g, failed := errgroup.WithContext(context.Background())
	loops, end := context.WithCancel(context.Background())
	return &lifecycle{group: g, failed: failed, loops: loops, endLoops: end}
}

// loop runs f under the group until the loops' context ends.
func (l *lifecycle) loop(f func(context.Context)) { l.loopOn(l.loops, f) }

// loopOn runs f under the group until ctx ends (a loop that must outlive
// the others: its caller ends ctx).
func (l *lifecycle) loopOn(ctx context.Context, f func(context.Context)) {
	l.group.Go(func() error { f(ctx); return nil })
}

// run runs f under the group with the loops' context; an error it returns
// is fatal: it ends the run.
func (l *lifecycle) run(f func(context.Context) error) {
	l.group.Go(func() error { return f(l.loops) })
}

// serve runs a server's accept loop under the group (an error it returns
// is fatal) and adds its stop to the shutdown.
func (l *lifecycle) serve(serve func() error, stop func(context.Context)) {
	l.group.Go(serve)
	l.onStop(stop)
}

// onStop adds a step to the shutdown, before every step added earlier.
func (l *lifecycle) onStop(stop func(context.Context)) { l.stops = append(l.stops, stop) }

// shutdown calls the stops, newest first, within timeout for them all,
// then ends the background loops and waits for every goroutine of the
// group. The errors returned meanwhile are not the run's: the one that
// ended it, if any, was taken from failed.
func (l *lifecycle) shutdown(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, stop := range slices.Backward(l.stops) {
		stop(ctx)
	}
	l.endLoops()
	_ = l.group.Wait()
}

// waitGrace waits out the shutdown grace period, during which the open
// xDS streams are still served and updated; a fatal error (failed done)
// ends it early.
func waitGrace(grace time.Duration, failed <-chan struct{}) {
	if grace <= 0 {
		return
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-t.C:
	case <-failed:
	}
}
