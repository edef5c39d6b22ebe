package ratelimit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xds-server/xds-server/e2e/harness"
)

// A master that hangs (SIGSTOP: connections open, nothing answered) under
// concurrent load does not hold up the other masters' calls: each master
// has its own lane of script runs, so while the paused master's run waits
// for the timeout (3 times, then once a second as its breaker probes), the
// calls on the live masters keep being decided, none failed and none
// waiting for the paused master. Its own calls fail (timeout, then the
// open breaker).
func TestRedisClusterHungMasterUnderLoad(t *testing.T) {
	c := harness.RedisCluster(t, harness.RedisClusterOptions{})
	const timeout = 250 * time.Millisecond
	st := newModeStore(t, RedisConfig{Mode: RedisCluster, Addresses: c.Addrs(), KeyPrefix: "lanes:", Timeout: timeout})
	b := newClusterBatch(t, c, st, "h")
	var live, dead []Check
	for _, ch := range b.checks {
		ch.Limit.Requests, ch.Cap = 1<<30, 1<<30 // never over the limit
		if b.master[ch.Key] == b.down {
			dead = append(dead, ch)
		} else {
			live = append(live, ch)
		}
	}
	if len(live) == 0 || len(dead) == 0 {
		t.Fatalf("%d checks on live masters and %d on the paused one: want both", len(live), len(dead))
	}
	b.downServer.Pause()
	defer b.downServer.Resume()

	// 16 workers on the live masters' keys and 4 on the paused one's,
	// each one call at a time, for 2.5s: the paused master's breaker
	// opens after 3 timeouts and probes once or twice more meanwhile.
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	var liveOK, liveFailed, deadFailed, deadOK atomic.Int64
	var slowest atomic.Int64
	var firstErr sync.Once
	var wg sync.WaitGroup
	for w := range 20 {
		checks, isLive := live, true
		if w >= 16 {
			checks, isLive = dead, false
		}
		wg.Go(func() {
			// The paused master's callers at most one call a millisecond:
			// its open breaker answers at once, and they would spin.
			pace := time.NewTicker(time.Millisecond)
			defer pace.Stop()
			for i := w; ctx.Err() == nil; i++ {
				if !isLive {
					<-pace.C
				}
				ch := checks[i%len(checks)]
				start := time.Now()
				_, err := st.Decide(context.Background(), t0, []Check{ch})
				took := time.Since(start)
				switch {
				case isLive && err == nil:
					liveOK.Add(1)
					for {
						s := slowest.Load()
						if int64(took) <= s || slowest.CompareAndSwap(s, int64(took)) {
							break
						}
					}
				case isLive:
					liveFailed.Add(1)
					firstErr.Do(func() { t.Errorf("a call on a live master failed after %v: %v", took, err) })
				case err == nil:
					deadOK.Add(1)
				default:
					deadFailed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("live masters: %d calls decided, %d failed, slowest %v; paused master: %d failed, %d decided",
		liveOK.Load(), liveFailed.Load(), time.Duration(slowest.Load()), deadFailed.Load(), deadOK.Load())
	if liveOK.Load() < 1000 {
		t.Errorf("only %d calls decided on the live masters in 2.5s", liveOK.Load())
	}
	if s := time.Duration(slowest.Load()); s >= timeout {
		t.Errorf("a call on a live master took %v: it waited for the paused master (timeout %v)", s, timeout)
	}
	if deadOK.Load() != 0 || deadFailed.Load() == 0 {
		t.Errorf("paused master: %d calls decided, %d failed; want none decided", deadOK.Load(), deadFailed.Load())
	}
	_, err := st.Decide(context.Background(), t0, dead[:1])
	if !errors.Is(err, ErrBreakerOpen) {
		t.Errorf("after the load, a call on the paused master: %v, want the open breaker", err)
	}
}
