package xds_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/e2e/harness"
	"github.com/xds-server/xds-server/nodeindex"
	"github.com/xds-server/xds-server/xds"
)

// replicaVia is replica with its Consul reached through client, and a
// short timeout on the index table.
func replicaVia(t *testing.T, client *api.Client, name string) (*fixture, *nodeindex.Consul) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	table, err := nodeindex.NewConsul(context.Background(), nodeindex.ConsulConfig{
		Client: client, Prefix: "xds-server/subsetting", TTL: 10 * time.Minute, Replica: name, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = table.Close() })
	return startWith(t, xds.Config{
		Logger: log, Settings: haSettings, Listeners: haListeners(), RateLimitAddress: "127.0.0.1:18081",
		Subsetting: xds.SubsetConfig{IndexSource: xds.IndexConsul, Table: table, Timeout: 500 * time.Millisecond},
	}), table
}

// TestReplicaSlotsHealAfterPartition: replica a, cut off from Consul
// while it learns a catalog, gives the endpoints of a steady-subset
// service slots from its own table; replica b, which reaches Consul, gives
// them the shared ones; nodes connecting to a meanwhile get indices from
// a's own table too. Once a reaches Consul again, its periodic Expire
// moves slots and indices to the shared table, and a sends every node what
// b sends.
func TestReplicaSlotsHealAfterPartition(t *testing.T) {
	consul := harness.Consul(t)
	proxy := harness.StartProxy(t, consul.Addr())
	viaProxy, err := api.NewClient(&api.Config{Address: proxy.Addr})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := replicaVia(t, viaProxy, "a")
	b, tableB := replicaVia(t, consul.Client(), "b")
	// A retired endpoint keeps shared slot 0, so shared slots and a's own
	// (which start at 0) cannot agree by chance.
	if _, err := tableB.Acquire(context.Background(), "endpoints:svc-0", "retired"); err != nil {
		t.Fatal(err)
	}

	nodes := haNodes()[4:] // the app nodes: subsets of svc-0, no listeners
	proxy.Cut()
	a.srv.Update(haWorld(nil, true))
	a.srv.Reconcile()
	b.srv.Update(haWorld(nil, true))
	b.srv.Reconcile()
	for _, n := range nodes { // connected to a through the partition: indices from a's own table
		firstOfEach(t, a.client(t, n.config(false)), allTypes)
	}
	proxy.Heal()
	differ := func() string {
		for _, n := range nodes {
			if d := fetchAll(t, a, n.config(false)).diff(fetchAll(t, b, n.config(false))); d != "" {
				return n.id + ": " + d
			}
		}
		return ""
	}
	if differ() == "" {
		t.Fatal("a, cut off from Consul, sends what b sends: the test shows nothing")
	}
	a.srv.Expire()
	a.srv.Reconcile()
	if d := differ(); d != "" {
		t.Errorf("after healing, replicas still differ: %s", d)
	}
	for _, n := range nodes {
		if na, nb := nodeOf(a.srv, n.id), nodeOf(b.srv, n.id); na.IndexSource != "consul" || na.Index != nb.Index {
			t.Errorf("%s: index %d from %q on a, %d from %q on b", n.id, na.Index, na.IndexSource, nb.Index, nb.IndexSource)
		}
	}
	if v := counterValue(t, a, "xds_subset_indices_healed_total"); v != float64(len(nodes)) {
		t.Errorf("xds_subset_indices_healed_total = %v, want %d", v, len(nodes))
	}
	// svc-0 has 9 endpoints (subsets of 3: slotted); svc-1 is classic.
	if v := counterValue(t, a, "xds_subset_slots_healed_total"); v != 9 {
		t.Errorf("xds_subset_slots_healed_total = %v, want 9 (svc-0's endpoints)", v)
	}
}

func nodeOf(srv *xds.Server, id string) xds.Node {
	for _, n := range srv.Nodes() {
		if n.ID == id {
			return n
		}
	}
	return xds.Node{}
}

// counterValue reads an unlabeled counter from f's registry.
func counterValue(t *testing.T, f *fixture, name string) float64 {
	t.Helper()
	if n, err := testutil.GatherAndCount(f.reg, name); err != nil || n != 1 {
		t.Fatalf("%s: %d series, %v", name, n, err)
	}
	mfs, _ := f.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}
