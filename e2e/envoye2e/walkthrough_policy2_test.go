package envoye2e

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestReadmePolicyResolverWalkthrough runs the sh block of the README's
// "Walk-through: resolver, bad entries and subset health" as a script, with
// a real Envoy: the four example backends of the canary walk-through, the
// config entries of examples/policy written with `consul config write`,
// xds-server with examples/policy/xds-server-resolver.yaml and Envoy with
// examples/envoy/envoy-bootstrap.yaml, rewritten by wtRunWalkthrough. It
// asserts what the block's comments promise: the default subset (40 answers
// from v1); ring hash on x-user (20 of alice's requests on one backend,
// sixteen users on both of v1's); old-web's redirect (503 before it, then
// 20 answers from web-3 and web-4 only); the bad resolver rejected (metrics,
// log, validate's warning) while 40 answers still come from v1; and a 50/50
// split that gives v2's share to v1 while v2 is in maintenance (200 of 200
// on v1) and takes it back after.
func TestReadmePolicyResolverWalkthrough(t *testing.T) {
	skipShort(t)
	block := wtReadmeBlock(t, "\n### Walk-through: resolver, bad entries and subset health\n", "consul agent -dev",
		"go build -o bin/backend ./examples/backend", "bin/backend -service web",
		"go build -o bin/xds-server ./cmd/xds-server", "envoy -c examples/envoy/envoy-bootstrap.yaml")
	dir, out := wtRunWalkthrough(t, block, "policy", "envoy")
	wtCheckResolverWritten(t, out)
	counts := wtVersionCounts(out)
	wtCheckDefaultSubset(t, counts)
	wtCheckRingHash(t, out)
	wtCheckRedirect(t, out)
	wtCheckBadEntry(t, out, counts)
	wtCheckSubsetHealth(t, counts)
	wtCheckLoad(t, out)
	if t.Failed() {
		wtLogFiles(t, dir, "xds-server.log", "envoy.log", "web-1.log", "web-3.log")
	}
}

// wtCheckResolverWritten: Consul took every entry the block writes, the
// bad resolver too (Consul accepts a filter on Node.Meta).
func wtCheckResolverWritten(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{"service-defaults/web", "service-resolver/web", "service-defaults/old-web", "service-resolver/old-web", "service-splitter/web"} {
		if !strings.Contains(out, "Config entry written: "+want) {
			t.Errorf("no %q in the output", "Config entry written: "+want)
		}
	}
	if n := strings.Count(out, "Config entry written: service-resolver/web"); n != 4 {
		t.Errorf("%d service-resolver/web written, want 4 (v1, hash, bad, v1 again)", n)
	}
}

// wtCount is one line printed by `count`: answers by version, and any
// other answer (a failed request) counted apart.
type wtCount struct {
	v1, v2, other int
	line          string
}

// wtCountRE matches a line of `count`: "<n> v1", "<n> v2" or both, maybe
// with other words (failures) among them.
var wtCountRE = regexp.MustCompile(`(?m)^((?:\d+ \S+ ?)*\d+ v[12](?: \d+ \S+)*)$`)

// wtVersionCounts returns the lines `count` printed, in order. A line of
// `who` (backend names) is not one: it has no "v1" or "v2" word.
func wtVersionCounts(out string) []wtCount {
	var cs []wtCount
	for _, m := range wtCountRE.FindAllStringSubmatch(out, -1) {
		c := wtCount{line: m[1]}
		f := strings.Fields(m[1])
		for i := 0; i+1 < len(f); i += 2 {
			n, _ := strconv.Atoi(f[i])
			switch f[i+1] {
			case "v1":
				c.v1 += n
			case "v2":
				c.v2 += n
			default:
				c.other += n
			}
		}
		cs = append(cs, c)
	}
	return cs
}

// wtCountSteps are the block's `count` calls in order: step 4, step 7,
// then step 8's three.
const wtCountSteps = 5

// wtCheckDefaultSubset: step 4's 40 requests were all answered by v1.
func wtCheckDefaultSubset(t *testing.T, cs []wtCount) {
	t.Helper()
	if len(cs) != wtCountSteps {
		t.Fatalf("want %d lines of `count` (steps 4, 7, 8 x3), got %d: %+v", wtCountSteps, len(cs), cs)
	}
	if c := cs[0]; c.v1 != 40 || c.v2+c.other != 0 {
		t.Errorf("step 4: %q, want \"40 v1\" (the default subset)", c.line)
	}
}

// wtBackendLineRE matches a line of `who` or the users' loop: answers by
// backend ("20 web-1", "9 web-1 7 web-2").
var wtBackendLineRE = regexp.MustCompile(`(?m)^(\d+ web-\d(?: \d+ web-\d)*)$`)

// wtCheckRingHash: in step 5, 20 of alice's requests reached one backend
// of v1, and 16 users' requests reached both of v1's backends and no
// other.
func wtCheckRingHash(t *testing.T, out string) {
	t.Helper()
	lines := wtBackendLineRE.FindAllString(out, -1)
	if len(lines) != 3 {
		t.Fatalf("want 3 lines of answers by backend (step 5 twice, step 6), got %q", lines)
	}
	if lines[0] != "20 web-1" && lines[0] != "20 web-2" {
		t.Errorf("step 5: alice's 20 requests: %q, want all on web-1 or all on web-2", lines[0])
	}
	users := wtByBackend(lines[1])
	if len(users) != 2 || users["web-1"] == 0 || users["web-2"] == 0 || users["web-1"]+users["web-2"] != 16 {
		t.Errorf("step 5: sixteen users: %q, want all 16 answered, by both web-1 and web-2", lines[1])
	}
	t.Logf("ring hash: alice %q, sixteen users %q", lines[0], lines[1])
}

// wtByBackend parses "9 web-1 7 web-2" into answers by backend.
func wtByBackend(line string) map[string]int {
	by := map[string]int{}
	f := strings.Fields(line)
	for i := 0; i+1 < len(f); i += 2 {
		n, _ := strconv.Atoi(f[i])
		by[f[i+1]] += n
	}
	return by
}

// wtCheckRedirect: in step 6, /old answered 503 before old-web's resolver,
// and 20 requests after it were answered by web-3 and web-4 (web's v2)
// only, each at least once (web~v2 is a ring hash, web's LoadBalancer,
// and without the header each request picks at random: all 20 on one
// backend has a chance of 1 in 500,000).
func wtCheckRedirect(t *testing.T, out string) {
	t.Helper()
	if !regexp.MustCompile(`(?m)^503$`).MatchString(out) {
		t.Errorf("step 6: no line \"503\" (/old before the redirect: old-web has no instance)")
	}
	lines := wtBackendLineRE.FindAllString(out, -1)
	if len(lines) < 3 {
		return // reported by wtCheckRingHash
	}
	by := wtByBackend(lines[2])
	if len(by) != 2 || by["web-3"] == 0 || by["web-4"] == 0 || by["web-3"]+by["web-4"] != 20 {
		t.Errorf("step 6: /old after the redirect: %q, want 20 answers from web-3 and web-4 only, both answering", lines[2])
	}
}

// wtCheckBadEntry: in step 7, the bad resolver was rejected (bad_filter)
// in the metrics, the log and validate's warning (exit 0: "configuration
// is valid"), and 40 requests were still answered by v1 (the last good
// resolver's default subset, not the bad one's v2).
func wtCheckBadEntry(t *testing.T, out string, cs []wtCount) {
	t.Helper()
	for _, want := range []string{
		`xds_policy_rejected_entries{kind="service-resolver"} 1`,
		`xds_policy_rejections_total{kind="service-resolver",reason="bad_filter"} 1`,
		"configuration is valid",
		"xds-server: 1 warning:\n  discovery.consul.config_entries: service-resolver web: rejected at ",
		"Subsets[rack1].Filter: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("step 7: no %q in the output", want)
		}
	}
	if !regexp.MustCompile(`consul config entry rejected.*kind=service-resolver name=web field=Subsets\[rack1\]\.Filter reason=bad_filter`).MatchString(out) {
		t.Errorf("step 7: xds-server's log has no rejection of service-resolver web's Subsets[rack1].Filter (bad_filter)")
	}
	if len(cs) == wtCountSteps {
		if c := cs[1]; c.v1 != 40 || c.v2+c.other != 0 {
			t.Errorf("step 7: %q, want \"40 v1\" (the last good resolver kept)", c.line)
		}
	}
}

// wtCheckSubsetHealth: in step 8, 200 requests split 50/50 (v2's share
// within 15 points: four standard deviations of the binomial, 3.5 points),
// then with v2 in maintenance all 200 answered by v1 (none failed), then
// 50/50 again.
func wtCheckSubsetHealth(t *testing.T, cs []wtCount) {
	t.Helper()
	if len(cs) != wtCountSteps {
		return // reported by wtCheckDefaultSubset
	}
	for i, c := range cs[2:] {
		total := c.v1 + c.v2 + c.other
		share := 100 * float64(c.v2) / float64(max(total, 1))
		t.Logf("step 8, count %d: %q: v2's share %.1f%%", i+1, c.line, share)
		switch {
		case total != 200 || c.other != 0:
			t.Errorf("step 8, count %d: %q: want 200 answers, all from v1 or v2", i+1, c.line)
		case i == 1 && c.v1 != 200:
			t.Errorf("step 8, v2 in maintenance: %q, want \"200 v1\" (v2's share on v1, no request failed)", c.line)
		case i != 1 && math.Abs(share-50) > 15:
			t.Errorf("step 8, count %d: %q: want v2's share 50%% +- 15 points", i+1, c.line)
		}
	}
}

// wtLoadRE matches step 8's last line: the background load's status
// codes, counted.
var wtLoadRE = regexp.MustCompile(`(?m)^(\d+ \d{3}(?: \d+ \d{3})*)$`)

// wtCheckLoad: every request of step 8's background load, which ran from
// before v2's maintenance until v2 had its share back, was answered 200,
// and there were at least 100 of them (the load ran through both changes:
// each takes Consul, xds-server's debounce and, coming back, its 2 s hold).
func wtCheckLoad(t *testing.T, out string) {
	t.Helper()
	m := wtLoadRE.FindStringSubmatch(out)
	if m == nil {
		t.Errorf("step 8: no line of the background load's status codes (\"<n> 200\")")
		return
	}
	f := strings.Fields(m[1])
	n, _ := strconv.Atoi(f[0])
	t.Logf("step 8: background load through v2's maintenance and back: %q", m[1])
	if len(f) != 2 || f[1] != "200" || n < 100 {
		t.Errorf("step 8: background load %q, want every request answered 200, at least 100 of them", m[1])
	}
}
