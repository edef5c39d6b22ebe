package ratelimit

import "github.com/prometheus/client_golang/prometheus"

// Stores are prometheus.Collectors: NewService registers the metrics of
// its store with its own. They read the stores' atomics when scraped, so
// decisions pay nothing for them.

// redisDescs are the descriptions of a Redis store's metrics.
type redisDescs struct {
	state, trips, rejected, slotRuns, slotCalls, nodeRedone *prometheus.Desc
}

// newRedisDescs returns the descriptions with the constant labels l.
func newRedisDescs(l prometheus.Labels) *redisDescs {
	return &redisDescs{
		state: prometheus.NewDesc("ratelimit_redis_breaker_state",
			"State of the Redis store's circuit breaker (cluster mode: the highest of the masters' breakers' states): 0 closed, 1 open (calls answered by the failure mode at once), 2 half-open (one call probing Redis).", nil, l),
		trips: prometheus.NewDesc("ratelimit_redis_breaker_trips_total",
			"Times the Redis circuit breaker opened after ratelimit.redis.breaker_failures failed script runs in a row.", nil, l),
		rejected: prometheus.NewDesc("ratelimit_redis_breaker_rejected_total",
			"Store calls failed at once by the open Redis circuit breaker (answered by the failure mode).", nil, l),
		slotRuns: prometheus.NewDesc("ratelimit_redis_slot_runs_failed_total",
			"Cluster mode: script runs of one hash slot that failed (their node down, slow or paused); the calls with a check on that slot get the failure mode.", nil, l),
		slotCalls: prometheus.NewDesc("ratelimit_redis_slot_calls_failed_total",
			"Cluster mode: store calls answered by the failure mode because one of their slots' runs failed (its master down, slow, paused or its breaker open) while the other masters' slots were decided.", nil, l),
		nodeRedone: prometheus.NewDesc("ratelimit_redis_node_runs_redone_total",
			"Cluster mode: scripts run for all the slots of one master that found a key the master no longer serves (resharding, failover) and were run again one script per slot; nothing was written by the first run.", nil, l),
	}
}

var (
	redisMetricDescs = newRedisDescs(nil)
	// Under Split: the label store says which Redis.
	splitMainDescs      = newRedisDescs(prometheus.Labels{"store": "main"})
	splitPerSecondDescs = newRedisDescs(prometheus.Labels{"store": "per_second"})
)

func (d *redisDescs) describe(ch chan<- *prometheus.Desc) {
	ch <- d.state
	ch <- d.trips
	ch <- d.rejected
	ch <- d.slotRuns
	ch <- d.slotCalls
	ch <- d.nodeRedone
}

// Describe implements prometheus.Collector.
func (r *Redis) Describe(ch chan<- *prometheus.Desc) { redisMetricDescs.describe(ch) }

// Collect implements prometheus.Collector.
func (r *Redis) Collect(ch chan<- prometheus.Metric) { r.collect(ch, redisMetricDescs) }

func (r *Redis) collect(ch chan<- prometheus.Metric, d *redisDescs) {
	state, trips, rejected := r.br.state.Load(), r.br.trips.Load(), r.br.rejected.Load()
	r.batch.nodes.each(func(b *breaker) { // cluster mode: the masters' breakers, the highest state
		state, trips, rejected = max(state, b.state.Load()), trips+b.trips.Load(), rejected+b.rejected.Load()
	})
	ch <- prometheus.MustNewConstMetric(d.state, prometheus.GaugeValue, float64(state))
	ch <- prometheus.MustNewConstMetric(d.trips, prometheus.CounterValue, float64(trips))
	ch <- prometheus.MustNewConstMetric(d.rejected, prometheus.CounterValue, float64(rejected))
	ch <- prometheus.MustNewConstMetric(d.slotRuns, prometheus.CounterValue, float64(r.batch.stats.groupsFailed.Load()))
	ch <- prometheus.MustNewConstMetric(d.slotCalls, prometheus.CounterValue, float64(r.batch.stats.callsFailed.Load()))
	ch <- prometheus.MustNewConstMetric(d.nodeRedone, prometheus.CounterValue, float64(r.batch.nodeRuns.redone.Load()))
}

var (
	memoryKeysDesc = prometheus.NewDesc("ratelimit_memory_keys",
		"Keys held by the memory store (bounded by ratelimit.memory.max_keys).", nil, nil)
	memoryBytesDesc = prometheus.NewDesc("ratelimit_memory_bytes",
		"Accounted bytes of the keys held by the memory store (bounded by ratelimit.memory.max_bytes).", nil, nil)
	memoryEvictionsDesc = prometheus.NewDesc("ratelimit_memory_evictions_total",
		"Keys dropped by the memory store, by reason: full (expired, to make room for a new key), sweep (expired, by the background sweep), cold (holding under half its limit, forgotten to make room for a new key) or hot (holding at least half its limit, folded into the store's sketch to make room).", []string{"reason"}, nil)
	memoryOverflowDesc = prometheus.NewDesc("ratelimit_memory_overflow_total",
		"Checks of new keys that found the memory store full and could not make room, counted approximately in its sketch.", nil, nil)
)

// Describe implements prometheus.Collector.
func (m *Memory) Describe(ch chan<- *prometheus.Desc) {
	ch <- memoryKeysDesc
	ch <- memoryBytesDesc
	ch <- memoryEvictionsDesc
	ch <- memoryOverflowDesc
}

// Collect implements prometheus.Collector: it takes each shard's lock in
// turn, briefly.
func (m *Memory) Collect(ch chan<- prometheus.Metric) {
	var keys, bytes int64
	var st memStats
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		keys += int64(len(sh.m))
		bytes += sh.bytes
		st.evictedFull += sh.stats.evictedFull
		st.evictedSweep += sh.stats.evictedSweep
		st.evictedCold += sh.stats.evictedCold
		st.evictedHot += sh.stats.evictedHot
		st.overflowed += sh.stats.overflowed
		sh.mu.Unlock()
	}
	ch <- prometheus.MustNewConstMetric(memoryKeysDesc, prometheus.GaugeValue, float64(keys))
	ch <- prometheus.MustNewConstMetric(memoryBytesDesc, prometheus.GaugeValue, float64(bytes))
	ch <- prometheus.MustNewConstMetric(memoryEvictionsDesc, prometheus.CounterValue, float64(st.evictedFull), "full")
	ch <- prometheus.MustNewConstMetric(memoryEvictionsDesc, prometheus.CounterValue, float64(st.evictedSweep), "sweep")
	ch <- prometheus.MustNewConstMetric(memoryEvictionsDesc, prometheus.CounterValue, float64(st.evictedCold), "cold")
	ch <- prometheus.MustNewConstMetric(memoryEvictionsDesc, prometheus.CounterValue, float64(st.evictedHot), "hot")
	ch <- prometheus.MustNewConstMetric(memoryOverflowDesc, prometheus.CounterValue, float64(st.overflowed))
}
