package ratelimit

import (
	"context"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/xds-server/xds-server/e2e/harness"
)

// scriptRuns is how many EVALSHA and EVAL commands Redis has run.
func scriptRuns(t *testing.T, srv *harness.RedisServer) int {
	t.Helper()
	info, err := redisClient(t, srv).Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range regexp.MustCompile(`cmdstat_(?:evalsha|eval):calls=(\d+)`).FindAllStringSubmatch(info, -1) {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	return n
}

// Concurrent calls share script runs, and each still gets its own
// answer: 400 calls of one hit each on a limit of 300 admit exactly 300,
// in fewer runs than calls.
func TestRedisBatchesConcurrentCalls(t *testing.T) {
	srv := harness.Redis(t, harness.RedisOptions{})
	st := newRedisStore(t, srv, RedisConfig{Pipelines: 1})
	now := time.Unix(1_700_000_000, 0)
	limit := Limit{FixedWindow, 300, Hour, 0}
	before := scriptRuns(t, srv)
	const calls = 400
	var wg sync.WaitGroup
	results := make(chan Result, calls)
	start := make(chan struct{})
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// Every other call also checks a key of its own, which is
			// always admitted: a batch mixes calls of different sizes.
			checks := []Check{{Key: "shared_", Limit: limit, Cap: 300, Hits: 1}}
			if i%2 == 0 {
				checks = append(checks, Check{Key: "own_" + strconv.Itoa(i) + "_", Limit: limit, Cap: 300, Hits: 1})
			}
			res, err := st.Decide(context.Background(), now, checks)
			if err != nil {
				t.Error(err)
				return
			}
			if len(res) != len(checks) || (len(res) == 2 && !res[1].Allowed) {
				t.Errorf("call %d: results %+v", i, res)
			}
			results <- res[0]
		}()
	}
	close(start)
	wg.Wait()
	close(results)
	admitted := 0
	for r := range results {
		if r.Allowed {
			admitted++
		}
	}
	if admitted != 300 {
		t.Errorf("admitted %d of %d calls on a limit of 300", admitted, calls)
	}
	runs := scriptRuns(t, srv) - before
	t.Logf("%d calls in %d script runs", calls, runs)
	if runs >= calls {
		t.Errorf("%d script runs for %d concurrent calls: no batching", runs, calls)
	}
}

// Closing the store answers queued calls with an error instead of
// leaving them waiting.
func TestRedisCloseFailsCalls(t *testing.T) {
	srv := harness.Redis(t, harness.RedisOptions{})
	st := newRedisStore(t, srv, RedisConfig{})
	st.Close()
	_, err := st.Decide(context.Background(), time.Now(), []Check{{Key: "k_", Limit: Limit{FixedWindow, 1, Second, 0}, Cap: 1, Hits: 1}})
	if err == nil {
		t.Error("Decide on a closed store succeeded")
	}
}
