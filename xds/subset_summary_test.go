package xds

import (
	"fmt"
	"slices"
	"testing"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/subsetting"
)

// TestSubsetSummaryAgreesWithTheReport: the console's cheap summary gives
// the same connections per endpoint and balance as the full report, and
// SubsetOf the same share of a node, with subsetting (steady, classic,
// endpoints not serving, disconnected nodes) and without.
func TestSubsetSummaryAgreesWithTheReport(t *testing.T) {
	for name, tc := range map[string]struct {
		alg  subsetting.Algorithm
		size int
	}{
		"steady":       {subsetting.Steady, 4},
		"classic":      {subsetting.Classic, 4},
		"no subsets":   {subsetting.Steady, 0},
		"size too big": {subsetting.Classic, 50},
	} {
		t.Run(name, func(t *testing.T) {
			s := subsetServer(t, tc.size, tc.alg)
			for i := range 25 {
				connect(s, int64(i+1), fmt.Sprintf("n%02d", i))
			}
			for _, stream := range []int64{3, 7, 8} {
				s.cb.OnStreamClosed(stream, nil) // known, not connected
			}
			w := world(1, 12)
			w.Services[0].Endpoints[1].Health = discovery.HealthDraining
			w.Services[0].Endpoints[5].Health = discovery.HealthUnhealthy
			s.Update(w)
			s.rec.reconcile()
			rep, ok := s.Subsets("svc-000", everyNode)
			if !ok {
				t.Fatal("no report")
			}
			sum, ok := s.SubsetSummary("svc-000", 10)
			if !ok {
				t.Fatal("no summary")
			}
			if sum.Subsetting != rep.Subsetting || sum.Algorithm != rep.Algorithm || sum.SubsetSize != rep.SubsetSize || sum.Balance != rep.Balance {
				t.Errorf("summary %+v, report %+v", sum, rep)
			}
			for _, e := range rep.Endpoints {
				if got := sum.Connections[e.ID]; got != e.Connections {
					t.Errorf("connections of %s: summary %d, report %d", e.ID, got, e.Connections)
				}
			}
			if len(sum.Connections) != len(rep.Endpoints) {
				t.Errorf("summary has %d endpoints, report %d", len(sum.Connections), len(rep.Endpoints))
			}
			wantIDs := []string{"n00", "n01", "n02", "n03", "n04", "n05", "n06", "n07", "n08", "n09"}
			if !slices.Equal(sum.Nodes, wantIDs) || sum.KnownNodes != 25 {
				t.Errorf("nodes %v of %d, want %v of 25", sum.Nodes, sum.KnownNodes, wantIDs)
			}
			for _, n := range rep.Nodes {
				got, ok := s.SubsetOf("svc-000", n.ID)
				if !ok || !slices.Equal(got.Subset, n.Subset) || !slices.Equal(got.Replacements, n.Replacements) ||
					!slices.Equal(got.Endpoints, n.Endpoints) || got.Connected != n.Connected || got.Index != n.Index {
					t.Errorf("SubsetOf(%s) = %+v, %v; report %+v", n.ID, got, ok, n)
				}
			}
			if _, ok := s.SubsetOf("svc-000", "nobody"); ok {
				t.Error("SubsetOf an unknown node: want false")
			}
			if _, ok := s.SubsetOf("nope", "n00"); ok {
				t.Error("SubsetOf an unknown service: want false")
			}
			if _, ok := s.SubsetSummary("nope", 10); ok {
				t.Error("summary of an unknown service: want false")
			}
		})
	}
}

// TestSubsetSummaryBoundsNodeIDs: the ids are the smallest, sorted, at
// most the number asked and never more than MaxSummaryNodes.
func TestSubsetSummaryBoundsNodeIDs(t *testing.T) {
	s := subsetServer(t, 2, subsetting.Steady)
	n := MaxSummaryNodes + 50
	for i := range n {
		connect(s, int64(i+1), fmt.Sprintf("n%05d", n-1-i)) // in reverse order
	}
	s.Update(world(1, 6))
	s.rec.reconcile()
	for _, limit := range []int{0, 1, 7, MaxSummaryNodes + 1} {
		sum, _ := s.SubsetSummary("svc-000", limit)
		want := limit
		if limit <= 0 || limit > MaxSummaryNodes {
			want = MaxSummaryNodes
		}
		if len(sum.Nodes) != want || !slices.IsSorted(sum.Nodes) || sum.Nodes[0] != "n00000" || sum.KnownNodes != n {
			t.Errorf("limit %d: %d ids (sorted %v, first %q) of %d; want the %d smallest of %d", limit, len(sum.Nodes),
				slices.IsSorted(sum.Nodes), sum.Nodes[0], sum.KnownNodes, want, n)
		}
		total := 0
		for _, c := range sum.Connections {
			total += c
		}
		if total != 2*n {
			t.Errorf("limit %d: %d connections, want %d (every node, 2 each)", limit, total, 2*n)
		}
	}
}
