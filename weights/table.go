package weights

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"time"
)

// Reason says where an endpoint's weight comes from.
type Reason string

// Reasons, as shown on /debug/weights.
const (
	// ReasonReported: the endpoint's own smoothed weight.
	ReasonReported Reason = "reported"
	// ReasonOverloaded: its own weight, cut by the overload guard, which
	// last cut it (utilization above the threshold) and holds while the
	// utilization stays between the recover mark and the threshold.
	ReasonOverloaded Reason = "overloaded"
	// ReasonRecovering: its own weight, still cut by the guard, which
	// last gave weight back (utilization below the recover mark).
	ReasonRecovering Reason = "recovering"
	// ReasonBlackout: usable reports for less than the blackout period;
	// the service's mean weight.
	ReasonBlackout Reason = "blackout"
	// ReasonExpired: the last usable report is older than the expiration
	// period; the service's mean weight.
	ReasonExpired Reason = "expired"
	// ReasonIncomplete: reports arrive, but never with both qps > 0 and a
	// known utilization; the service's mean weight.
	ReasonIncomplete Reason = "incomplete"
	// ReasonNoReports: no report yet; the service's mean weight, or its
	// static weight when no endpoint of the service has its own weight.
	ReasonNoReports Reason = "no_reports"
)

// Own reports whether the weight is the endpoint's own (from its reports)
// rather than a fallback.
func (r Reason) Own() bool {
	return r == ReasonReported || r == ReasonOverloaded || r == ReasonRecovering
}

// Row is one endpoint's line of the weight table: everything
// /debug/weights shows.
type Row struct {
	Endpoint string  `json:"endpoint"`     // endpoint ID
	Weight   uint32  `json:"weight"`       // EDS weight, >= 1
	Float    float64 `json:"float_weight"` // weight before integer scaling: requests/s per unit utilization, or the fallback
	Reason   Reason  `json:"reason"`
	// Measured is the formula on the latest fresh measurement (before
	// smoothing and the guard); 0 when unknown.
	Measured float64 `json:"measured"`
	// Capacity is the smoothed qps/utilization, requests/s at utilization
	// 1 (no error penalty); 0 when unknown. The per-node solver uses it.
	Capacity    float64       `json:"capacity"`
	Guard       float64       `json:"guard"`         // overload guard multiplier in (0, 1]; 1 = no cut
	Static      uint32        `json:"static_weight"` // weight from discovery, >= 1
	LastReport  time.Time     `json:"last_report"`   // latest report of any kind; zero if none
	Age         time.Duration `json:"-"`             // now - LastReport; 0 if none (age_seconds in JSON)
	Nodes       int           `json:"nodes"`         // nodes with a fresh client (LRS) report
	QPS         float64       `json:"qps"`           // fresh requests/s: the backend's, else the sum of the nodes'
	EPS         float64       `json:"eps"`           // fresh errors/s, from the same source as QPS
	Utilization float64       `json:"utilization"`   // fresh utilization (App, else CPU); 0 = unknown
	// Balance is the factor global balancing applied to the formula's
	// weight (BalanceService); 0 when the service was not balanced.
	Balance float64 `json:"balance,omitempty"`
	// Named is the fresh backend report's named metrics; shared with the
	// tracker: read only.
	Named map[string]float64 `json:"named,omitempty"`
}

// ServiceTable is the weights of one service, rows sorted by endpoint.
type ServiceTable struct {
	Name string `json:"service"`
	Rows []Row  `json:"endpoints"`
	// Mean is the mean Float of the endpoints with their own weight; 0 if
	// none has one.
	Mean float64 `json:"mean_weight"`
	// PredictedSpread is the max/mean utilization global balancing
	// predicts under these weights (BalanceService); 0 when not balanced.
	PredictedSpread float64 `json:"predicted_spread,omitempty"`
	// Zones is the spill state of each zone of a service with spill on
	// (ServiceConfig.Spill), sorted by region and zone; nil otherwise.
	Zones []ZoneRow `json:"zones,omitempty"`
}

// Row returns the row of endpoint id, if present.
func (s ServiceTable) Row(id string) (Row, bool) {
	i, ok := slices.BinarySearchFunc(s.Rows, id, func(r Row, id string) int {
		return strings.Compare(r.Endpoint, id)
	})
	if !ok {
		return Row{}, false
	}
	return s.Rows[i], true
}

// Table is the weights of every tracked service, sorted by name.
type Table struct {
	At       time.Time      `json:"at"` // the now of the Update that computed it
	Services []ServiceTable `json:"services"`
}

// MarshalJSON writes a row with its age in seconds.
func (r Row) MarshalJSON() ([]byte, error) {
	type plain Row
	return json.Marshal(struct {
		plain
		AgeSeconds float64 `json:"age_seconds"`
	}{plain(r), r.Age.Seconds()})
}

// Service returns the table of service name, if present.
func (t Table) Service(name string) (ServiceTable, bool) {
	i, ok := slices.BinarySearchFunc(t.Services, name, func(s ServiceTable, n string) int {
		return strings.Compare(s.Name, n)
	})
	if !ok {
		return ServiceTable{}, false
	}
	return t.Services[i], true
}

// Weight returns the EDS weight of one endpoint, if present.
func (t Table) Weight(service, endpoint string) (uint32, bool) {
	s, ok := t.Service(service)
	if !ok {
		return 0, false
	}
	r, ok := s.Row(endpoint)
	return r.Weight, ok
}

// Changed reports whether new differs enough from old to push: a service or
// an endpoint appeared or disappeared, an endpoint's weight expired or
// came back from expiry, or some endpoint's share of its service (its
// integer weight over the service's sum) moved by more than minChange
// relative to its old share (0.05 = 5%; minChange <= 0 or NaN means any
// change). Pass as old the table last pushed, not the last computed, so
// that slow drifts add up.
func Changed(old, new Table, minChange float64) bool {
	if !(minChange > 0) {
		minChange = 0
	}
	if len(old.Services) != len(new.Services) {
		return true
	}
	for i := range old.Services {
		if serviceChanged(old.Services[i], new.Services[i], minChange) {
			return true
		}
	}
	return false
}

func serviceChanged(old, new ServiceTable, minChange float64) bool {
	if old.Name != new.Name || len(old.Rows) != len(new.Rows) {
		return true
	}
	oldSum, newSum := sumWeights(old.Rows), sumWeights(new.Rows)
	for i, o := range old.Rows {
		n := new.Rows[i]
		if o.Endpoint != n.Endpoint || (o.Reason == ReasonExpired) != (n.Reason == ReasonExpired) {
			return true
		}
		os := float64(o.Weight) / oldSum
		ns := float64(n.Weight) / newSum
		if d := math.Abs(ns - os); d > minChange*os || (minChange == 0 && o.Weight != n.Weight) {
			return true
		}
	}
	return false
}

func sumWeights(rows []Row) float64 {
	s := 0.0
	for _, r := range rows {
		s += float64(r.Weight)
	}
	return max(s, 1)
}
