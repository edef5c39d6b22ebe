package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// events records what happened, in order, from any goroutine.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, s)
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got)
}

func TestClosersRunNewestFirstOnce(t *testing.T) {
	var ev events
	var cl closers
	for _, name := range []string{"listener", "check", "store"} {
		cl.push(func() { ev.add(name) })
	}
	cl.close()
	cl.close()
	if got, want := ev.list(), []string{"store", "check", "listener"}; !slices.Equal(got, want) {
		t.Errorf("closed %v, want %v", got, want)
	}
}

// TestLifecycleShutdownOrder: the stops run newest first, all before the
// background loops end, and shutdown returns once every goroutine of the
// group has; an error returned during the shutdown is not fatal.
func TestLifecycleShutdownOrder(t *testing.T) {
	var ev events
	l := newLifecycle()
	l.loop(func(ctx context.Context) { <-ctx.Done(); ev.add("loop ended") })
	l.run(func(ctx context.Context) error { <-ctx.Done(); return errors.New("discovery: stopped") })
	l.onStop(func(context.Context) { ev.add("stop drains") })
	served := make(chan struct{})
	l.serve(func() error { <-served; ev.add("serve returned"); return nil },
		func(ctx context.Context) {
			if _, ok := ctx.Deadline(); !ok {
				t.Error("a stop without the shutdown deadline")
			}
			ev.add("stop server")
			close(served)
		})
	select {
	case <-l.failed.Done():
		t.Fatal("failed before any error")
	default:
	}
	l.shutdown(time.Minute)
	got := ev.list()
	if end := slices.Index(got, "loop ended"); end < slices.Index(got, "stop server") || end < slices.Index(got, "stop drains") {
		t.Errorf("the loop ended before a stop: %v", got)
	}
	stops := slices.DeleteFunc(slices.Clone(got), func(s string) bool { return s != "stop server" && s != "stop drains" })
	if want := []string{"stop server", "stop drains"}; !slices.Equal(stops, want) {
		t.Errorf("stops %v, want %v (newest first)", stops, want)
	}
	if !slices.Contains(got, "serve returned") {
		t.Errorf("shutdown returned before the server's goroutine: %v", got)
	}
}

// TestLifecycleFatalError: the first error a run returns ends failed, with
// that error as its cause, while the loops go on until the shutdown.
func TestLifecycleFatalError(t *testing.T) {
	l := newLifecycle()
	boom := errors.New("xds: serve: boom")
	loopEnded := make(chan struct{})
	l.loop(func(ctx context.Context) { <-ctx.Done(); close(loopEnded) })
	l.serve(func() error { return boom }, func(context.Context) {})
	<-l.failed.Done()
	if err := context.Cause(l.failed); !errors.Is(err, boom) {
		t.Errorf("cause %v, want %v", err, boom)
	}
	select {
	case <-loopEnded:
		t.Fatal("a fatal error ended the loops before the shutdown")
	default:
	}
	l.shutdown(time.Minute)
	<-loopEnded
}

func TestWaitGraceEndsOnFailure(t *testing.T) {
	failed := make(chan struct{})
	close(failed)
	start := time.Now()
	waitGrace(time.Hour, failed)
	if d := time.Since(start); d > time.Minute {
		t.Errorf("waited %v after a failure", d)
	}
}
