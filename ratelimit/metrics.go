package ratelimit

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/xds-server/xds-server/internal/metricreg"
)

// otherRule is the rule label of the keys beyond ServiceConfig.MaxMetricKeys.
const otherRule = "_other"

// metrics are the service's collectors. Per-rule counters are labelled
// by domain and rule (the rule key without its domain); their
// cardinality is that of the configured rules, plus per-value keys
// where the configuration asks for them (detailed_metric,
// value_to_metric) and of overrides, bounded by MaxMetricKeys.
type metrics struct {
	requests struct{ ok, overLimit, invalid prometheus.Counter }

	hits, over, overLocal, near, within, shadow *prometheus.CounterVec

	storeErrors  prometheus.Counter
	failureMode  *prometheus.CounterVec
	storeLatency prometheus.Histogram
	decision     prometheus.Histogram
	reloads      *prometheus.CounterVec
	classHits    [numCriticalities][2]prometheus.Counter // [class][within, over]
	tracked      prometheus.GaugeFunc

	rules    sync.Map // domain + "\x00" + stat key -> *ruleCounters
	byRule   sync.Map // *Rule -> *ruleCounters, for matches keyed by their rule's key
	nRules   atomic.Int64
	maxRules int64
}

// ruleCounters are one rule key's counters, resolved once.
type ruleCounters struct {
	hits, over, overLocal, near, within, shadow prometheus.Counter
}

var latencyBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25}

// newMetrics makes the metrics; tracked counts the keys whose demand per
// class is tracked.
func newMetrics(reg prometheus.Registerer, maxRules int, tracked func() float64) (*metrics, error) {
	m := &metrics{maxRules: int64(maxRules)}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratelimit_requests_total", Help: "ShouldRateLimit calls, by result (ok, over_limit, invalid).",
	}, []string{"result"})
	m.requests.ok = requests.WithLabelValues("ok")
	m.requests.overLimit = requests.WithLabelValues("over_limit")
	m.requests.invalid = requests.WithLabelValues("invalid")
	rule := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"domain", "rule"})
	}
	m.hits = rule("ratelimit_total_hits_total", "Hits (hits_addend) of descriptors that matched a rule.")
	m.over = rule("ratelimit_over_limit_total", "Hits refused (or, in shadow mode, that would have been).")
	m.overLocal = rule("ratelimit_over_limit_with_local_cache_total", "Hits refused by the local over-limit cache without asking the store.")
	m.near = rule("ratelimit_near_limit_total", "Hits admitted above the near-limit ratio (ratelimit.near_limit_ratio, 0.8 by default) of the limit.")
	m.within = rule("ratelimit_within_limit_total", "Hits admitted.")
	m.shadow = rule("ratelimit_shadow_mode_total", "Hits over the limit of a shadow_mode rule, admitted anyway.")
	m.storeErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ratelimit_store_errors_total", Help: "Store calls that failed (answered per the failure mode).",
	})
	m.failureMode = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratelimit_failure_mode_total", Help: "Descriptors answered by the failure mode after a store failure, by mode (allow, deny).",
	}, []string{"mode"})
	m.storeLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "ratelimit_store_latency_seconds", Help: "Time of one store call (all descriptors of a request).", Buckets: latencyBuckets,
	})
	m.decision = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "ratelimit_decision_latency_seconds", Help: "Time to answer one ShouldRateLimit call.", Buckets: latencyBuckets,
	})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratelimit_config_reloads_total", Help: "Configuration reloads, by result (success, error); a failed reload keeps the previous configuration.",
	}, []string{"result"})
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("error")
	classHits := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratelimit_criticality_hits_total", Help: "Hits decided by a limit, by the request's criticality class and result (within, over).",
	}, []string{"class", "result"})
	for c := range m.classHits {
		m.classHits[c][0] = classHits.WithLabelValues(Criticality(c).String(), "within")
		m.classHits[c][1] = classHits.WithLabelValues(Criticality(c).String(), "over")
	}
	m.tracked = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ratelimit_criticality_tracked_keys", Help: "Limit keys whose demand per criticality class is tracked for the adaptive reserve.",
	}, tracked)
	if err := metricreg.Register(reg, requests, m.hits, m.over, m.overLocal, m.near, m.within, m.shadow,
		m.storeErrors, m.failureMode, m.storeLatency, m.decision, m.reloads, classHits, m.tracked); err != nil {
		return nil, fmt.Errorf("ratelimit: registering metrics: %w", err)
	}
	return m, nil
}

// match returns the counters of a match.
func (m *metrics) match(domain string, mt Match) *ruleCounters {
	if mt.Override || mt.Rule == nil || mt.StatKey != mt.Rule.Key {
		return m.rule(domain, mt.StatKey)
	}
	if rc, ok := m.byRule.Load(mt.Rule); ok {
		return rc.(*ruleCounters)
	}
	rc := m.rule(domain, mt.StatKey)
	m.byRule.Store(mt.Rule, rc)
	return rc
}

// rule returns the counters of a rule key (statKey includes the domain).
func (m *metrics) rule(domain, statKey string) *ruleCounters {
	id := domain + "\x00" + statKey
	if rc, ok := m.rules.Load(id); ok {
		return rc.(*ruleCounters)
	}
	label := strings.TrimPrefix(statKey, domain+".")
	if m.nRules.Load() >= m.maxRules {
		label = otherRule
		if rc, ok := m.rules.Load(domain + "\x00" + otherRule); ok {
			return rc.(*ruleCounters)
		}
		id = domain + "\x00" + otherRule
	}
	rc := &ruleCounters{
		hits: m.hits.WithLabelValues(domain, label), over: m.over.WithLabelValues(domain, label),
		overLocal: m.overLocal.WithLabelValues(domain, label), near: m.near.WithLabelValues(domain, label),
		within: m.within.WithLabelValues(domain, label), shadow: m.shadow.WithLabelValues(domain, label),
	}
	if prev, loaded := m.rules.LoadOrStore(id, rc); loaded {
		return prev.(*ruleCounters)
	}
	m.nRules.Add(1)
	return rc
}
