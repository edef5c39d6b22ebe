package bench

import "testing"

func TestHARunSetWritesAndRSSPerNode(t *testing.T) {
	for name, tc := range map[string]struct {
		run     HARun
		set     float64
		perNode []float64
	}{
		"the set's rate sums every replica's, RSS per node from before to synced": {
			run: HARun{Nodes: 4, WriteSeconds: 2,
				Writes:    []map[string]float64{{"drain_put": 2, "weights": 2}, {"weights": 1}, {"weights": 1}},
				RSSBefore: []float64{100, 100, 200}, RSSSynced: []float64{500, 300, 200}, RSSAfter: []float64{900, 900, 900}},
			set: 3, perNode: []float64{100, 50, 0},
		},
		"a run without the synced reading has no RSS per node": {
			run: HARun{Nodes: 4, WriteSeconds: 1, Writes: []map[string]float64{{"weights": 1}}, RSSBefore: []float64{100}},
			set: 1, perNode: []float64{},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.run.TotalWritesPerSecond(); got != tc.set {
				t.Errorf("TotalWritesPerSecond = %v, want %v", got, tc.set)
			}
			got := tc.run.RSSPerNode()
			if len(got) != len(tc.perNode) {
				t.Fatalf("RSSPerNode = %v, want %v", got, tc.perNode)
			}
			for i := range got {
				if got[i] != tc.perNode[i] {
					t.Errorf("RSSPerNode = %v, want %v", got, tc.perNode)
				}
			}
		})
	}
}
