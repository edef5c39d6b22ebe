package ratelimit

import "github.com/prometheus/client_golang/prometheus"

// Stores are prometheus.Collectors: NewService registers the metrics of
// its store with its own. They read the stores' atomics when scraped, so
// decisions pay nothing for them.

var (
	redisBreakerStateDesc = prometheus.NewDesc("ratelimit_redis_breaker_state",
		"State of the Redis store's circuit breaker: 0 closed, 1 open (calls answered by the failure mode at once), 2 half-open (one call probing Redis).", nil, nil)
	redisBreakerTripsDesc = prometheus.NewDesc("ratelimit_redis_breaker_trips_total",
		"Times the Redis circuit breaker opened after ratelimit.redis.breaker_failures failed script runs in a row.", nil, nil)
	redisBreakerRejectedDesc = prometheus.NewDesc("ratelimit_redis_breaker_rejected_total",
		"Store calls failed at once by the open Redis circuit breaker (answered by the failure mode).", nil, nil)
)

// Describe implements prometheus.Collector.
func (r *Redis) Describe(ch chan<- *prometheus.Desc) {
	ch <- redisBreakerStateDesc
	ch <- redisBreakerTripsDesc
	ch <- redisBreakerRejectedDesc
}

// Collect implements prometheus.Collector.
func (r *Redis) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(redisBreakerStateDesc, prometheus.GaugeValue, float64(r.br.state.Load()))
	ch <- prometheus.MustNewConstMetric(redisBreakerTripsDesc, prometheus.CounterValue, float64(r.br.trips.Load()))
	ch <- prometheus.MustNewConstMetric(redisBreakerRejectedDesc, prometheus.CounterValue, float64(r.br.rejected.Load()))
}
