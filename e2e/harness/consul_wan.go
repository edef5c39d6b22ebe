package harness

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"testing"
)

// ConsulWAN starts one Consul agent (as Consul starts it, with a serf WAN
// port) per datacenter of dcs, in that order, joins them over the WAN on
// loopback and waits until each one lists every datacenter in
// /v1/catalog/datacenters. Each agent is the server of its datacenter; a
// client of one reads another's catalog through it (?dc=), as Consul
// forwards over the WAN. An agent started again after Stop joins the
// others again (-retry-join-wan) and is ready once it sees them all. The
// agents are stopped when the test ends.
func ConsulWAN(t testing.TB, dcs ...string) []*ConsulAgent {
	t.Helper()
	if len(dcs) < 2 || slices.Contains(dcs, "") || len(slices.Compact(slices.Sorted(slices.Values(dcs)))) != len(dcs) {
		t.Fatalf("harness: ConsulWAN(%q): want at least two distinct datacenter names", dcs)
	}
	agents := make([]*ConsulAgent, len(dcs))
	for i, dc := range dcs {
		agents[i] = ConsulWith(t, ConsulOptions{Datacenter: dc, WAN: true})
	}
	for i, a := range agents {
		var peers []string
		for j, b := range agents {
			if j != i {
				peers = append(peers, b.WANAddr())
			}
		}
		a.mu.Lock()
		a.wan, a.wanDCs = peers, slices.Clone(dcs)
		a.mu.Unlock()
		if i > 0 {
			if err := a.Client().Agent().Join(agents[0].WANAddr(), true); err != nil {
				t.Fatalf("harness: consul %s: join the WAN of %s: %v", a.dc, agents[0].dc, err)
			}
		}
	}
	for _, a := range agents {
		a.mu.Lock()
		exited := a.exited
		a.mu.Unlock()
		if err := a.waitReady(exited); err != nil {
			t.Fatalf("harness: consul %s: %v\nlog tail:\n%s", a.dc, err, a.logTail(40))
		}
	}
	return agents
}

// Datacenter is the agent's datacenter.
func (a *ConsulAgent) Datacenter() string { return a.dc }

// WANAddr is the host:port of the agent's serf WAN; "" without one.
func (a *ConsulAgent) WANAddr() string {
	if a.serfWAN == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(a.serfWAN))
}

// wanArgs are the command-line arguments that join the other datacenters'
// agents again when this one starts (retried every second).
func (a *ConsulAgent) wanArgs() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var args []string
	for _, addr := range a.wan {
		args = append(args, "-retry-join-wan="+addr)
	}
	if len(args) > 0 {
		args = append(args, "-retry-interval-wan=1s")
	}
	return args
}

// seesDatacenters reports whether the agent lists every datacenter of
// want in its catalog.
func (a *ConsulAgent) seesDatacenters(want []string) error {
	if len(want) == 0 {
		return nil
	}
	have, err := a.Client().Catalog().Datacenters()
	if err != nil {
		return fmt.Errorf("catalog/datacenters: %w", err)
	}
	for _, dc := range want {
		if !slices.Contains(have, dc) {
			return fmt.Errorf("datacenter %q not joined yet (the agent sees %q)", dc, have)
		}
	}
	return nil
}
