package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestQuickLabEnvoy runs the lab end to end through real Envoys (one per
// client node: 18 Envoys, 6 backends, subsets of 3, seed 3 as
// TestQuickLab, 16 s per policy) on round robin and per-node weights only
// (within 90 s), and asserts only what cannot be noise: every Envoy's own
// /clusters holds the simulator's subset, the backends' utilization is
// measured, and no request fails. How well the per-node weights (from the
// backends' ORCA and the Envoys' own LRS) even out the utilization is
// logged: the lab's figures judge it.
func TestQuickLabEnvoy(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs the load lab through Envoys")
	}
	for _, find := range []func() (string, error){consulBinary, envoyBinary} {
		if _, err := find(); err != nil {
			if os.Getenv("XDS_SERVER_REQUIRE_INTEGRATION") == "1" {
				t.Fatal(err)
			}
			t.Skip(err)
		}
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // binaries, logs and the Envoys' files, removed after the test
	o := defaultOptions()
	o.quick()
	o.kind, o.seed, o.only = envoyClients, 3, roundRobin+"|"+perNode
	o.duration, o.final, o.window = 16*time.Second, 6*time.Second, 4*time.Second
	o.json = filepath.Join(t.TempDir(), "lab.json")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if err := run(ctx, o, []string{"--quick", "--clients", "envoy"}, io.Discard, log); err != nil {
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
	if len(got.Policies) != 2 || got.Policies[0].Name != roundRobin || got.Policies[1].Name != perNode {
		t.Fatalf("policies %s, want round robin then per-node", b)
	}
	rr, pn := got.Policies[0], got.Policies[1]
	for _, p := range got.Policies {
		t.Logf("%-12s max/mean %.3f (simulator %.3f), errors %d, subsets unlike the simulator's %d", p.Name, p.MaxMean, p.SimMaxMean, p.Errors, p.SubsetsUnlike)
		if p.Errors != 0 {
			t.Errorf("%s: %d requests through Envoy failed, want 0", p.Name, p.Errors)
			logDiagnostics(t, tmp, p.Name)
		}
		if p.SubsetsUnlike != 0 {
			t.Errorf("%s: %d client nodes (their Envoy's /clusters or /debug/config) without the simulator's subset, want 0", p.Name, p.SubsetsUnlike)
		}
	}
	if !(rr.MaxMean > 1) {
		t.Errorf("round robin max/mean %.3f: the backends' utilization was not measured", rr.MaxMean)
	}
	// Whether per-node weights beat round robin is the lab's figure
	// (BENCHMARKS.md, 3 runs on a quiet machine): within 16 s, on two
	// cores shared with the whole suite under -race, per-node came out
	// 1.807 against round robin's 1.392 once (CI, fresh clone), and 1.07-1.12
	// otherwise. Here it is reported, not judged.
	t.Logf("per-node %.3f against round robin %.3f", pn.MaxMean, rr.MaxMean)
}

// logDiagnostics logs what the diagnostics of a policy's run say about
// its failed requests (the files go with the test's TMPDIR): their codes,
// the seconds they fell in, each backend's utilization by second, and the
// weights the Envoys with the most errors gave each backend.
func logDiagnostics(t *testing.T, tmp, policy string) {
	t.Helper()
	slug := strings.Fields(policy)[0]
	files, _ := filepath.Glob(filepath.Join(tmp, "xds-lab-*", "diag-"+slug+"*-run*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Log(err)
			continue
		}
		var d diagnostics
		if err := json.Unmarshal(b, &d); err != nil {
			t.Log(err)
			continue
		}
		bySec, byClient := map[int]int64{}, map[int]int64{}
		for c, m := range d.Errors {
			for s, n := range m {
				bySec[s] += n
				byClient[c] += n
			}
		}
		t.Logf("%s: error codes by client %v; errors by second %v", filepath.Base(f), d.Codes, bySec)
		for j, u := range d.Util {
			t.Logf("  backend %d utilization by second: %.2f", j, u)
		}
		worst := slices.SortedFunc(maps.Keys(byClient), func(a, b int) int { return cmp.Compare(byClient[b], byClient[a]) })
		for _, c := range worst[:min(3, len(worst))] {
			var line []string
			for _, s := range d.Envoys {
				var hs []string
				for _, h := range s.Envoys[c] {
					hs = append(hs, fmt.Sprintf("b%d:w%d/a%d/t%d", h.Backend, h.Weight, h.RqActive, h.RqTimeout))
				}
				line = append(line, fmt.Sprintf("%ds[%s]", s.At, strings.Join(hs, " ")))
			}
			t.Logf("  client %d (%d errors, subset %v), backend:weight/active/timeouts by second: %s", c, byClient[c], d.Subsets[c], strings.Join(line, " "))
		}
	}
}
