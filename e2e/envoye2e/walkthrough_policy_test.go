package envoye2e

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestReadmePolicyWalkthrough runs the sh block of the README's "Walk-through:
// a canary from config entries" as a script, with a real Envoy: four
// example backends (web-1 and web-2 of version v1, web-3 and web-4 of v2),
// the config entries of examples/policy written with `consul config write`,
// xds-server with examples/policy/xds-server.yaml and Envoy with
// examples/envoy/envoy-bootstrap.yaml, rewritten by wtRunWalkthrough (the
// harness's Consul, free ports, building from the repository, Envoy without
// hot restart). It asserts what
// the block's comments promise: 400 requests split 90/10 then 50/50 (v2's
// share within four standard deviations of a binomial: 6 and 10 points),
// 20 x-canary requests all answered by v2, and after the splitter's delete
// 40 requests answered by all four backends.
func TestReadmePolicyWalkthrough(t *testing.T) {
	skipShort(t)
	block := wtReadmeBlock(t, "\n### Walk-through: a canary from config entries\n", "consul agent -dev",
		"go build -o bin/backend ./examples/backend", "bin/backend -service web",
		"go build -o bin/xds-server ./cmd/xds-server", "envoy -c examples/envoy/envoy-bootstrap.yaml")
	dir, out := wtRunWalkthrough(t, block, "policy", "envoy")
	wtCheckEntriesWritten(t, out)
	wtCheckSplits(t, out)
	wtCheckCanaryHeader(t, out)
	wtCheckSplitterDeleted(t, out)
	if t.Failed() {
		wtLogFiles(t, dir, "xds-server.log", "envoy.log", "web-1.log", "web-3.log")
	}
}

// wtCheckEntriesWritten: Consul took each entry of steps 2, 5 and 6.
func wtCheckEntriesWritten(t *testing.T, out string) {
	t.Helper()
	for _, kind := range []string{"service-defaults", "service-resolver", "service-splitter", "service-router"} {
		if !strings.Contains(out, "Config entry written: "+kind+"/web") {
			t.Errorf("no %q in the output", "Config entry written: "+kind+"/web")
		}
	}
}

// wtVersionsRE matches a line of `count 400`: the answers of v1 and v2.
var wtVersionsRE = regexp.MustCompile(`(?m)^(\d+) v1 (\d+) v2$`)

// wtCheckSplits: step 4's count is 400 answers with v2's share 10% +- 6
// points, step 5's 400 with v2's share 50% +- 10 points (each about four
// standard deviations of the binomial: 1.5 and 2.5 points).
func wtCheckSplits(t *testing.T, out string) {
	t.Helper()
	lines := wtVersionsRE.FindAllStringSubmatch(out, -1)
	if len(lines) != 2 {
		t.Fatalf("want 2 lines \"<n> v1 <n> v2\" (steps 4 and 5), got %d", len(lines))
	}
	for i, want := range []struct {
		step       int
		share, tol float64
	}{{4, 10, 6}, {5, 50, 10}} {
		v1, _ := strconv.Atoi(lines[i][1])
		v2, _ := strconv.Atoi(lines[i][2])
		share := 100 * float64(v2) / float64(v1+v2)
		t.Logf("step %d: v1 %d, v2 %d: v2's share %.1f%%", want.step, v1, v2, share)
		if v1+v2 != 400 || math.Abs(share-want.share) > want.tol {
			t.Errorf("step %d: %q: want 400 answers, v2's share %v%% +- %v points", want.step, lines[i][0], want.share, want.tol)
		}
	}
}

// wtCheckCanaryHeader: in step 6 every one of 20 requests with x-canary: 1
// was answered by v2.
func wtCheckCanaryHeader(t *testing.T, out string) {
	t.Helper()
	if !regexp.MustCompile(`(?m)^20 v2$`).MatchString(out) {
		t.Errorf("step 6: no line \"20 v2\" (20 x-canary requests, all answered by v2)")
	}
}

// wtBackendsRE matches step 7's line: the answers of each backend.
var wtBackendsRE = regexp.MustCompile(`(?m)^(\d+) web-1 (\d+) web-2 (\d+) web-3 (\d+) web-4$`)

// wtCheckSplitterDeleted: after the splitter's delete, 40 requests went
// round robin to all four backends (one Envoy worker, one connection: 10
// each; at least 5 each, so as not to depend on Envoy's rotation).
func wtCheckSplitterDeleted(t *testing.T, out string) {
	t.Helper()
	m := wtBackendsRE.FindStringSubmatch(out)
	if m == nil {
		t.Errorf("step 7: no line \"<n> web-1 <n> web-2 <n> web-3 <n> web-4\" (every backend answering)")
		return
	}
	sum := 0
	for _, s := range m[1:] {
		n, _ := strconv.Atoi(s)
		sum += n
		if n < 5 {
			t.Errorf("step 7: %q: a backend answered fewer than 5 of 40", m[0])
		}
	}
	if sum != 40 {
		t.Errorf("step 7: %q: %d answers, want 40", m[0], sum)
	}
}
