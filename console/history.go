package console

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/weights"
)

// serviceSample is one service at one sample time.
type serviceSample struct {
	name      string
	spread    float64 // max/mean utilization of serving endpoints; NaN unknown
	endpoints []endpointSample
}

type endpointSample struct {
	id          string
	weight      float64 // EDS weight (the table's, else the static one)
	utilization float64 // in [0, ...); NaN unknown
}

// samplePoint is what the history records of snap and the weight table.
func samplePoint(snap discovery.Snapshot, t weights.Table) []serviceSample {
	out := make([]serviceSample, 0, len(snap.Services))
	for _, svc := range snap.Services {
		st, _ := t.Service(svc.Name)
		s := serviceSample{name: svc.Name, endpoints: make([]endpointSample, 0, len(svc.Endpoints))}
		var utils []float64
		for _, ep := range svc.Endpoints {
			e := endpointSample{id: ep.ID, weight: float64(max(ep.Weight, 1)), utilization: math.NaN()}
			if row, ok := st.Row(ep.ID); ok {
				e.weight = float64(row.Weight)
				if row.Utilization > 0 {
					e.utilization = row.Utilization
					if ep.Health.Serving() {
						utils = append(utils, row.Utilization)
					}
				}
			}
			s.endpoints = append(s.endpoints, e)
		}
		s.spread = spread(utils)
		out = append(out, s)
	}
	return out
}

// spread is max/mean of xs (1 is even); NaN without values.
func spread(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	sum, hi := 0.0, 0.0
	for _, x := range xs {
		sum, hi = sum+x, max(hi, x)
	}
	if sum == 0 {
		return math.NaN()
	}
	return hi / (sum / float64(len(xs)))
}

// history is a ring of the last n samples of every service's spread and
// every endpoint's weight and utilization. It holds at most maxSeries
// series (services and endpoints together); new ones beyond are dropped
// and counted. A series not seen for n samples is forgotten.
type history struct {
	mu        sync.Mutex
	n         int
	maxSeries int
	dropped   prometheus.Counter

	times    []int64 // unix seconds; ring indexed like the series
	head     int     // next slot written
	count    int     // samples held, <= n
	seq      uint64  // samples taken
	services map[string]*serviceSeries
	series   int // services plus endpoints held
}

type serviceSeries struct {
	spread    []float32
	endpoints map[string]*endpointSeries
	seen      uint64
}

type endpointSeries struct {
	weight, util []float32
	seen         uint64
}

func newHistory(n, maxSeries int, dropped prometheus.Counter) *history {
	return &history{n: n, maxSeries: maxSeries, dropped: dropped, times: make([]int64, n),
		services: map[string]*serviceSeries{}}
}

func (h *history) newRing() []float32 {
	r := make([]float32, h.n)
	for i := range r {
		r[i] = float32(math.NaN())
	}
	return r
}

// add records one sample taken at now.
func (h *history) add(now time.Time, samples []serviceSample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	i := h.head
	h.times[i] = now.Unix()
	for _, s := range samples {
		ss := h.services[s.name]
		if ss == nil {
			if h.series >= h.maxSeries {
				h.dropped.Add(float64(1 + len(s.endpoints)))
				continue
			}
			ss = &serviceSeries{spread: h.newRing(), endpoints: map[string]*endpointSeries{}}
			h.services[s.name] = ss
			h.series++
		}
		ss.seen, ss.spread[i] = h.seq, float32(s.spread)
		for _, e := range s.endpoints {
			es := ss.endpoints[e.id]
			if es == nil {
				if h.series >= h.maxSeries {
					h.dropped.Inc()
					continue
				}
				es = &endpointSeries{weight: h.newRing(), util: h.newRing()}
				ss.endpoints[e.id] = es
				h.series++
			}
			es.seen, es.weight[i], es.util[i] = h.seq, float32(e.weight), float32(e.utilization)
		}
	}
	h.clearStale(i)
	h.head = (i + 1) % h.n
	h.count = min(h.count+1, h.n)
}

// clearStale writes NaN at slot i of series not seen in this sample and
// forgets those not seen for n samples. h.mu must be held.
func (h *history) clearStale(i int) {
	for name, ss := range h.services {
		for id, es := range ss.endpoints {
			if es.seen == h.seq {
				continue
			}
			es.weight[i], es.util[i] = float32(math.NaN()), float32(math.NaN())
			if h.seq-es.seen >= uint64(h.n) {
				delete(ss.endpoints, id)
				h.series--
			}
		}
		if ss.seen != h.seq {
			ss.spread[i] = float32(math.NaN())
			if h.seq-ss.seen >= uint64(h.n) && len(ss.endpoints) == 0 {
				delete(h.services, name)
				h.series--
			}
		}
	}
}

// size is the number of series and samples held.
func (h *history) size() (series, samples int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.series, h.count
}

// History is /ui/api/history/{name}: oldest sample first; null where
// nothing was recorded.
type History struct {
	Service         string            `json:"service"`
	IntervalSeconds float64           `json:"interval_seconds"`
	Times           []int64           `json:"times"` // unix seconds
	Spread          nums              `json:"spread"`
	Endpoints       []EndpointHistory `json:"endpoints"`
}

// EndpointHistory is one endpoint's series.
type EndpointHistory struct {
	ID          string `json:"id"`
	Weight      nums   `json:"weight"`
	Utilization nums   `json:"utilization"`
}

// of returns the history of service name, or false if none is held.
func (h *history) of(name string, interval time.Duration) (History, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ss, ok := h.services[name]
	if !ok {
		return History{}, false
	}
	start := (h.head - h.count + h.n) % h.n
	order := func(r []float32) nums {
		out := make(nums, h.count)
		for k := range out {
			out[k] = r[(start+k)%h.n]
		}
		return out
	}
	out := History{Service: name, IntervalSeconds: interval.Seconds(), Times: make([]int64, h.count),
		Spread: order(ss.spread), Endpoints: make([]EndpointHistory, 0, len(ss.endpoints))}
	for k := range out.Times {
		out.Times[k] = h.times[(start+k)%h.n]
	}
	for id, es := range ss.endpoints {
		out.Endpoints = append(out.Endpoints, EndpointHistory{ID: id, Weight: order(es.weight), Utilization: order(es.util)})
	}
	slices.SortFunc(out.Endpoints, func(a, b EndpointHistory) int { return strings.Compare(a.ID, b.ID) })
	return out, true
}

// nums is a series in JSON: NaN is null, 4 significant digits.
type nums []float32

func (ns nums) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(ns)*6)
	b = append(b, '[')
	for k, v := range ns {
		if k > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			b = append(b, "null"...)
			continue
		}
		b = strconv.AppendFloat(b, float64(v), 'g', 4, 32)
	}
	return append(b, ']'), nil
}
