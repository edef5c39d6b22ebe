package consulstate

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/consul/api"
)

// Defaults of WatchConfig.
const (
	DefaultWait        = 5 * time.Minute
	DefaultMinInterval = 50 * time.Millisecond
	DefaultBackoffBase = 250 * time.Millisecond
	DefaultBackoffMax  = 30 * time.Second
)

// WatchConfig configures Watch.
type WatchConfig struct {
	Op          string         // names the watch in its logs ("op")
	Wait        time.Duration  // blocking wait of a query; 0: DefaultWait
	MinInterval time.Duration  // least time between two queries; 0: DefaultMinInterval
	BackoffBase time.Duration  // first retry delay after an error; 0: DefaultBackoffBase
	BackoffMax  time.Duration  // longest retry delay; 0: DefaultBackoffMax
	Failed      func()         // called after each failed query; nil: none
	Logger      *slog.Logger   // nil: slog.Default()
	Clock       Clock          // nil: Wall
	Rand        func() float64 // jitter in [0, 1); nil: math/rand/v2.Float64
}

func (c WatchConfig) withDefaults() WatchConfig {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&c.Wait, DefaultWait}, {&c.MinInterval, DefaultMinInterval}, {&c.BackoffBase, DefaultBackoffBase}, {&c.BackoffMax, DefaultBackoffMax}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Clock = orWall(c.Clock)
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	return c
}

// Fetch is one blocking query with q (WaitIndex, WaitTime and the
// context set), e.g. a KV List; it returns the result and its meta.
type Fetch[T any] func(q *api.QueryOptions) (T, *api.QueryMeta, error)

// Watch runs blocking queries until ctx is done and calls apply with each
// result that changed (and the first one), with its index. It follows
// design.md §4 "Discovery (Consul)": an index that goes backwards resets
// to a non-blocking read, an index of 0 counts as 1, queries are at least
// MinInterval apart, and errors are retried with jittered exponential
// backoff (reset on success), apply not being called meanwhile; the first
// query after an error is a non-blocking read, whose result is applied.
func Watch[T any](ctx context.Context, cfg WatchConfig, fetch Fetch[T], apply func(v T, index uint64)) {
	cfg = cfg.withDefaults()
	var index uint64
	failures := 0
	for ctx.Err() == nil {
		start := cfg.Clock.Now()
		q := (&api.QueryOptions{WaitIndex: index, WaitTime: cfg.Wait}).WithContext(ctx)
		v, meta, err := fetch(q)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			index = 0 // after an outage, read at once: Consul may have lost its state
			cfg.failed(failures, err)
			Sleep(ctx, cfg.Clock, Backoff(failures, cfg.BackoffBase, cfg.BackoffMax, cfg.Rand))
			continue
		}
		if failures > 0 {
			cfg.Logger.Info("consul watch resumed", "op", cfg.Op, "failures", failures)
			failures = 0
		}
		var got uint64
		if meta != nil {
			got = meta.LastIndex
		}
		next, changed := NextIndex(index, got)
		index = next
		if changed {
			apply(v, max(got, 1))
		}
		Sleep(ctx, cfg.Clock, cfg.MinInterval-cfg.Clock.Now().Sub(start))
	}
}

// failed counts and logs a failed query: the first of a run at warn, the
// next ones at debug (the backoff bounds them anyway).
func (c WatchConfig) failed(n int, err error) {
	if c.Failed != nil {
		c.Failed()
	}
	level := slog.LevelDebug
	if n == 1 {
		level = slog.LevelWarn
	}
	c.Logger.Log(context.Background(), level, "consul watch failed; retrying, keeping the last state", "op", c.Op, "failures", n, "error", err)
}
