package console

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/xds-server/xds-server/internal/metricreg"
)

type metrics struct {
	requests      *prometheus.CounterVec
	seriesDropped prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "console_requests_total", Help: "Requests to the web console (/ui/), by kind: page, api, asset or error.",
		}, []string{"kind"}),
		seriesDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "console_history_series_dropped_total",
			Help: "Samples of series (services, endpoints) the console history did not keep: it was full.",
		}),
	}
	for _, k := range []string{"page", "api", "asset", "error"} {
		m.requests.WithLabelValues(k)
	}
	if err := metricreg.Register(reg, m.requests, m.seriesDropped); err != nil {
		return nil, fmt.Errorf("console: metrics: %w", err)
	}
	return m, nil
}
