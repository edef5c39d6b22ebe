package console

import (
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/xds"
)

// ServiceView is /ui/api/services/{name}.
type ServiceView struct {
	At        time.Time      `json:"at"`
	Name      string         `json:"name"`
	Endpoints []EndpointView `json:"endpoints"`
	Counts    ServiceCount   `json:"counts"`
	Spread    *float64       `json:"spread"`           // measured max/mean utilization of serving endpoints; null unknown
	Predicted float64        `json:"predicted_spread"` // what balancing predicts; 0 when not balanced
	Subsets   *SubsetView    `json:"subsets,omitempty"`
	Policy    *PolicyView    `json:"policy,omitempty"`  // from Consul's config entries; absent when they are not read
	History   *History       `json:"history,omitempty"` // with ?history=1
}

// EndpointView is one endpoint on the service page.
type EndpointView struct {
	ID          string   `json:"id"`
	Address     string   `json:"address"`
	Node        string   `json:"node,omitempty"`
	Datacenter  string   `json:"datacenter,omitempty"` // Consul datacenter it was read from
	Zone        string   `json:"zone,omitempty"`
	Health      string   `json:"health"`
	Drain       []string `json:"drain"` // reasons; empty when not draining
	Weight      uint32   `json:"weight"`
	Reason      string   `json:"weight_reason,omitempty"`
	Utilization float64  `json:"utilization"` // 0 unknown
	QPS         float64  `json:"qps"`
	ReportAge   *float64 `json:"report_age_seconds"` // null: no report
	Connections int      `json:"connections"`        // nodes with it in their EDS
}

// SubsetView is the service's subsets, and one chosen node's.
type SubsetView struct {
	Subsetting bool        `json:"subsetting"`
	Algorithm  string      `json:"algorithm,omitempty"`
	SubsetSize int         `json:"subset_size"`
	Balance    xds.Balance `json:"balance"`
	// Nodes are the ids of the first MaxNodeChoices known nodes by id (the
	// page's choice); KnownNodes counts them all. Any known node can be
	// asked for with ?node=.
	Nodes      []string        `json:"nodes"`
	KnownNodes int             `json:"known_nodes"`
	Node       *xds.SubsetNode `json:"node,omitempty"`
	// Levels are the chosen node's priority levels, for a service with a
	// locality policy (services.<name>.locality).
	Levels *xds.ServiceLevels `json:"levels,omitempty"`
}

// MaxNodeChoices bounds SubsetView.Nodes.
const MaxNodeChoices = 500

// service returns the view of service name (with node's subset when
// node is set), or false if it is unknown.
func (c *Console) service(name, node string) (ServiceView, bool) {
	snap, _ := c.snapshot()
	svc, ok := snap.Service(name)
	if !ok {
		return ServiceView{}, false
	}
	st, _ := c.table().Service(name)
	v := ServiceView{At: c.cfg.Now(), Name: name, Endpoints: make([]EndpointView, 0, len(svc.Endpoints)),
		Counts: counts(discovery.Snapshot{Services: []discovery.Service{svc}})[0], Predicted: st.PredictedSpread}
	sum, subsets := c.subsets.get(name, v.At)
	var utils []float64
	for _, ep := range svc.Endpoints {
		e := EndpointView{ID: ep.ID, Address: hostPort(ep), Node: ep.Node, Datacenter: ep.Datacenter, Zone: ep.Locality.Zone,
			Health: ep.Health.String(), Drain: []string{}, Weight: max(ep.Weight, 1), Connections: sum.Connections[ep.ID]}
		if ep.Drain != "" {
			e.Drain = strings.Split(ep.Drain, ",")
		}
		if row, ok := st.Row(ep.ID); ok {
			e.Weight, e.Reason, e.Utilization, e.QPS = row.Weight, string(row.Reason), row.Utilization, row.QPS
			if !row.LastReport.IsZero() {
				age := math.Max(0, v.At.Sub(row.LastReport).Seconds())
				e.ReportAge = &age
			}
			if row.Utilization > 0 && ep.Health.Serving() {
				utils = append(utils, row.Utilization)
			}
		}
		v.Endpoints = append(v.Endpoints, e)
	}
	v.Policy = c.policyOf(name)
	if s := spread(utils); !math.IsNaN(s) {
		v.Spread = &s
	}
	if subsets {
		v.Subsets = &SubsetView{Subsetting: sum.Subsetting, Algorithm: sum.Algorithm, SubsetSize: sum.SubsetSize,
			Balance: sum.Balance, Nodes: sum.Nodes, KnownNodes: sum.KnownNodes}
		if node != "" {
			if sn, ok := c.cfg.Fleet.SubsetOf(name, node); ok {
				v.Subsets.Node = &sn
			}
			if lv, ok := c.cfg.Fleet.LevelsOf(name, node); ok {
				v.Subsets.Levels = &lv
			}
		}
	}
	return v, true
}

func hostPort(ep discovery.Endpoint) string {
	return net.JoinHostPort(ep.Address, strconv.Itoa(ep.Port))
}
