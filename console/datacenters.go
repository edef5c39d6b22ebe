package console

import (
	"cmp"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// DatacenterState is one Consul datacenter's state, from the discovery
// source's per-datacenter metrics (xds_discovery_consul_datacenter_*).
type DatacenterState struct {
	Datacenter  string    `json:"datacenter"`
	Stale       bool      `json:"stale"` // its last known endpoints are served: it cannot be read
	StaleSince  time.Time `json:"stale_since,omitzero"`
	LastSuccess time.Time `json:"last_success,omitzero"`
	Errors      float64   `json:"errors"` // failed reads
}

// datacenters collects DatacenterStates from the metric families.
type datacenters map[string]*DatacenterState

// add records m of family name if it is a per-datacenter metric.
func (d datacenters) add(name string, m *dto.Metric) {
	if !strings.HasPrefix(name, "xds_discovery_consul_datacenter_") {
		return
	}
	dc := label(m, "datacenter")
	s := d[dc]
	if s == nil {
		s = &DatacenterState{Datacenter: dc}
		d[dc] = s
	}
	switch name {
	case "xds_discovery_consul_datacenter_stale":
		s.Stale = m.GetGauge().GetValue() > 0
	case "xds_discovery_consul_datacenter_stale_since_timestamp_seconds":
		s.StaleSince = unixTime(m.GetGauge().GetValue())
	case "xds_discovery_consul_datacenter_last_success_timestamp_seconds":
		s.LastSuccess = unixTime(m.GetGauge().GetValue())
	case "xds_discovery_consul_datacenter_errors_total":
		s.Errors = m.GetCounter().GetValue()
	}
}

// list is the states sorted by datacenter (never nil).
func (d datacenters) list() []DatacenterState {
	out := make([]DatacenterState, 0, len(d))
	for _, s := range d {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b DatacenterState) int { return cmp.Compare(a.Datacenter, b.Datacenter) })
	return out
}

// unixTime is unix seconds as a UTC time; zero for 0 or less.
func unixTime(s float64) time.Time {
	if s <= 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(s*1e9)).UTC()
}
