package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestQuickLab runs the lab end to end on a small fleet (6 backends, 18
// clients, subsets of 3, 16 s per policy; seed 3, where the simulator puts
// round robin at 1.39 max/mean and the formula, the weakest, at 1.22) with real Consul, xds-server,
// backends and grpc-go clients, and asserts only what cannot be noise:
// the balanced and per-node weights even out the utilization better than
// round robin (max/mean; simulator 1.00), the formula's weights make it no
// worse than round robin (formulaSlack), and no request fails.
func TestQuickLab(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs the load lab")
	}
	if _, err := consulBinary(); err != nil {
		if os.Getenv("XDS_SERVER_REQUIRE_INTEGRATION") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Setenv("TMPDIR", t.TempDir()) // the lab's binaries and logs go there, removed after the test
	o := defaultOptions()
	o.quick()
	o.seed = 3
	o.duration, o.final, o.window = 16*time.Second, 6*time.Second, 4*time.Second
	o.json = filepath.Join(t.TempDir(), "lab.json")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if err := run(ctx, o, []string{"--quick"}, io.Discard, log); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(o.json)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Policies []jsonPolicy `json:"policies"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Policies) != 4 {
		t.Fatalf("%d policies, want 4: %s", len(got.Policies), b)
	}
	rr := got.Policies[0]
	if rr.Name != roundRobin || !(rr.MaxMean > 1) {
		t.Fatalf("first policy %+v, want round robin with a spread", rr)
	}
	for _, p := range got.Policies {
		t.Logf("%-16s max/mean %.3f (simulator %.3f), errors %d", p.Name, p.MaxMean, p.SimMaxMean, p.Errors)
		if p.Errors != 0 {
			t.Errorf("%s: %d requests failed, want 0", p.Name, p.Errors)
		}
		switch {
		case p.Name == formula && p.MaxMean >= rr.MaxMean+formulaSlack:
			t.Errorf("%s: max/mean %.3f, worse than round robin's %.3f", p.Name, p.MaxMean, rr.MaxMean)
		case p.Name != roundRobin && p.Name != formula && p.MaxMean >= rr.MaxMean:
			t.Errorf("%s: max/mean %.3f, not below round robin's %.3f", p.Name, p.MaxMean, rr.MaxMean)
		}
	}
}

// formulaSlack is how far above round robin's max/mean the formula's may
// come out before the test calls its weights broken. Its edge on this
// fleet is small (simulator 1.215 against 1.393; measured 1.25 to 1.35 on
// a quiet machine) and 16 s on two cores shared with the suite under
// -race can erase it: 1.396 against round robin's 1.387 once in CI. How
// well it does is the lab's figure (BENCHMARKS.md).
const formulaSlack = 0.1
