package weights

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Limits beyond which a report is absurd rather than merely high.
const (
	// MaxUtilization bounds CPU and App: 100 means 100 times the capacity.
	MaxUtilization = 100.0
	// MaxRate bounds QPS and EPS, in requests (errors) per second.
	MaxRate = 1e9
	// MaxNamed bounds the number of named metrics in one report.
	MaxNamed = 64
)

// ErrInvalidReport is wrapped by every error of Report.Validate.
var ErrInvalidReport = errors.New("weights: invalid report")

// Report is one load measurement of one endpoint of a service.
//
// A backend report (ORCA, HTTP push) has Node == "" and carries the
// backend's own view: its total QPS and EPS and its utilization. A client
// report (LRS) names the node that sent the load and carries that node's
// QPS and EPS to the endpoint; its utilization is usually 0 (unknown).
type Report struct {
	Service  string    // service name; required
	Endpoint string    // endpoint ID within the service; required
	Node     string    // xDS node ID of the reporting client; "" for backend reports
	At       time.Time // when the load was measured; required
	QPS      float64   // requests per second, in [0, MaxRate]
	EPS      float64   // errors per second, in [0, MaxRate]; may exceed QPS
	CPU      float64   // CPU utilization in [0, MaxUtilization]; 1 = all of it; 0 = unknown
	App      float64   // application utilization, as CPU; 0 = unknown
	// Named metrics (ORCA named_metrics, LRS load_metric_stats): finite
	// values, at most MaxNamed, names non-empty. Informational only.
	Named map[string]float64
	// LameDuck, on ORCA reports only, says the backend asks to be drained:
	// its lame-duck metric (ORCAConfig.LameDuckMetric) is 1 or more. The
	// pipeline turns it into transitions that drains subscribe to
	// (Pipeline.SubscribeLameDuck); the formula ignores it.
	LameDuck bool
}

// Utilization is the utilization the formula uses: App when set (> 0),
// else CPU. 0 means unknown.
func (r Report) Utilization() float64 {
	if r.App > 0 {
		return r.App
	}
	return r.CPU
}

// Validate reports every problem of r at once. The error wraps
// ErrInvalidReport and names the service, the endpoint and each field.
func (r Report) Validate() error {
	var errs []error
	if r.Service == "" {
		errs = append(errs, errors.New("service is empty"))
	}
	if r.Endpoint == "" {
		errs = append(errs, errors.New("endpoint is empty"))
	}
	if r.At.IsZero() {
		errs = append(errs, errors.New("time is missing"))
	}
	errs = appendRange(errs, "qps", r.QPS, MaxRate)
	errs = appendRange(errs, "eps", r.EPS, MaxRate)
	errs = appendRange(errs, "cpu utilization", r.CPU, MaxUtilization)
	errs = appendRange(errs, "application utilization", r.App, MaxUtilization)
	if len(r.Named) > MaxNamed {
		errs = append(errs, fmt.Errorf("%d named metrics (at most %d)", len(r.Named), MaxNamed))
	}
	for name, v := range r.Named {
		if name == "" {
			errs = append(errs, errors.New("named metric with an empty name"))
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("named metric %q is %v", name, v))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w %q/%q: %w", ErrInvalidReport, r.Service, r.Endpoint, errors.Join(errs...))
}

// appendRange appends an error when v is not a number in [0, limit].
func appendRange(errs []error, field string, v, limit float64) []error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return append(errs, fmt.Errorf("%s is %v", field, v))
	case v < 0:
		return append(errs, fmt.Errorf("%s is negative (%v)", field, v))
	case v > limit:
		return append(errs, fmt.Errorf("%s %v is absurd (above %v)", field, v, limit))
	}
	return errs
}

// Weight is the weight of gRFC A58 (gRPC weighted_round_robin) and of
// Envoy's client-side WRR:
//
//	weight = qps / (utilization + (eps/qps) * penalty)
//
// qps and eps are requests and errors per second; utilization is the
// fraction of capacity in use (1 = all of it); penalty is A58's
// error_utilization_penalty (>= 0, usually 1), the utilization one error
// per request costs. With eps = 0 the weight is qps/utilization: the
// estimated capacity in requests per second at utilization 1. ok is false
// (weight 0) when the weight is unknown: qps <= 0, utilization <= 0, or any
// input not finite or negative.
func Weight(qps, eps, utilization, penalty float64) (weight float64, ok bool) {
	if !(qps > 0) || !(utilization > 0) || !(eps >= 0) || !(penalty >= 0) ||
		math.IsInf(qps, 0) || math.IsInf(eps, 0) || math.IsInf(utilization, 0) || math.IsInf(penalty, 0) {
		return 0, false
	}
	w := qps / (utilization + eps/qps*penalty)
	if !(w > 0) || math.IsInf(w, 0) {
		return 0, false
	}
	return w, true
}
