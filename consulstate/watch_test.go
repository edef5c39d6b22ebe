package consulstate

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// watchStep is one scripted answer of a fetch.
type watchStep struct {
	index uint64        // X-Consul-Index returned
	err   error         // a failed query
	took  time.Duration // how long the query took
}

func TestWatchIndexRulesAndBackoff(t *testing.T) {
	const minInterval, base = 10 * time.Millisecond, 100 * time.Millisecond
	fail := errors.New("consul down")
	steps := []watchStep{
		{index: 5},                              // first read: applied
		{index: 5},                              // wait expired without a change: not applied
		{index: 9, took: 30 * time.Millisecond}, // a long query: no pause after it
		{index: 3},                              // went backwards: applied, next read non-blocking
		{index: 0},                              // 0 counts as 1
		{err: fail},                             // retried with backoff, next read non-blocking
		{err: fail},
		{index: 1}, // after an outage: applied
	}
	clock := newStepClock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sent, applied []uint64
	failed := 0
	n := 0
	fetch := func(q *api.QueryOptions) (string, *api.QueryMeta, error) {
		sent = append(sent, q.WaitIndex)
		if q.WaitTime != time.Minute {
			t.Errorf("wait %v, want 1m", q.WaitTime)
		}
		if n == len(steps) {
			cancel()
			return "", nil, ctx.Err()
		}
		s := steps[n]
		n++
		clock.advance(s.took)
		if s.err != nil {
			return "", nil, s.err
		}
		return "v", &api.QueryMeta{LastIndex: s.index}, nil
	}
	cfg := WatchConfig{Op: "test", Wait: time.Minute, MinInterval: minInterval, BackoffBase: base, BackoffMax: time.Second,
		Failed: func() { failed++ }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: clock,
		Rand: func() float64 { return 1 }}
	Watch(ctx, cfg, fetch, func(v string, index uint64) { applied = append(applied, index) })

	if want := []uint64{0, 5, 5, 9, 0, 1, 0, 0, 1}; !slices.Equal(sent, want) {
		t.Errorf("indexes sent %v, want %v", sent, want)
	}
	if want := []uint64{5, 9, 3, 1, 1}; !slices.Equal(applied, want) {
		t.Errorf("indexes applied %v, want %v", applied, want)
	}
	if failed != 2 {
		t.Errorf("Failed called %d times, want 2", failed)
	}
	wantWaits := []time.Duration{minInterval, minInterval, minInterval, minInterval, base, 2 * base, minInterval}
	if got := clock.waits(); !slices.Equal(got, wantWaits) {
		t.Errorf("waits %v, want %v", got, wantWaits)
	}
}

func TestWatchBackoffResetsAfterSuccess(t *testing.T) {
	clock := newStepClock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fail := errors.New("down")
	steps := []watchStep{{err: fail}, {err: fail}, {err: fail}, {index: 2}, {err: fail}}
	n := 0
	fetch := func(q *api.QueryOptions) (int, *api.QueryMeta, error) {
		if n == len(steps) {
			cancel()
			return 0, nil, ctx.Err()
		}
		s := steps[n]
		n++
		if s.err != nil {
			return 0, nil, s.err
		}
		return 0, &api.QueryMeta{LastIndex: s.index}, nil
	}
	cfg := WatchConfig{MinInterval: time.Millisecond, BackoffBase: time.Second, BackoffMax: 3 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: clock, Rand: func() float64 { return 0 }}
	Watch(ctx, cfg, fetch, func(int, uint64) {})
	// Equal jitter with rnd 0: half of 1s, 2s, 3s (capped); then, after a
	// success, half of 1s again.
	want := []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond, time.Millisecond, 500 * time.Millisecond}
	if got := clock.waits(); !slices.Equal(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
}

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	if !Sleep(ctx, newStepClock(), time.Hour) {
		t.Error("Sleep on a clock that fires: false, want true")
	}
	if !Sleep(ctx, nil, 0) {
		t.Error("Sleep(0) with ctx alive: false, want true")
	}
	cancel()
	if Sleep(ctx, nil, time.Hour) {
		t.Error("Sleep with ctx done: true, want false")
	}
}
