package bench

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/hashicorp/consul/api"
)

// Drainer puts catalog endpoints into lame duck and back, alternately
// through Consul service maintenance and xds-server's admin drain API.
type Drainer struct {
	cat   Catalog
	agent *api.Agent
	admin string // http://host:port of xds-server's admin listener
}

// NewDrainer drains through agent (maintenance) and the admin address.
func NewDrainer(cat Catalog, agent *api.Agent, adminAddr string) *Drainer {
	return &Drainer{cat: cat, agent: agent, admin: "http://" + adminAddr}
}

// DrainWant is the wait target of endpoint e of service s being DRAINING.
func (d *Drainer) DrainWant(s, e int) Want {
	return Want{Key: d.cat.Key(s, e), Status: corev3.HealthStatus_DRAINING}
}

// Maintenance turns Consul service maintenance of the endpoint on or off.
func (d *Drainer) Maintenance(ctx context.Context, s, e int, on bool) error {
	id := d.cat.id(s, e)
	q := (&api.QueryOptions{}).WithContext(ctx)
	var err error
	if on {
		err = d.agent.EnableServiceMaintenanceOpts(id, "bench drain", q)
	} else {
		err = d.agent.DisableServiceMaintenanceOpts(id, q)
	}
	if err != nil {
		return fmt.Errorf("bench: maintenance of %s: %w", id, err)
	}
	return nil
}

// Admin drains the endpoint through POST /v1/drain, or undrains it with
// DELETE.
func (d *Drainer) Admin(ctx context.Context, s, e int, on bool) error {
	body := fmt.Sprintf(`{"service": %q, "endpoint": %q}`, d.cat.Service(s), d.cat.id(s, e))
	method := http.MethodPost
	if !on {
		method = http.MethodDelete
	}
	req, err := http.NewRequestWithContext(ctx, method, d.admin+"/v1/drain", strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("bench: drain: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("bench: drain: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("bench: %s /v1/drain %s: %s", method, body, resp.Status)
	}
	return nil
}
