package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestMakefileTargetsHaveHelp: every Makefile target has a "## target:
// what" comment line right above it, and `make help` lists them all.
func TestMakefileTargetsHaveHelp(t *testing.T) {
	repoRoot(t)
	b, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	rule := regexp.MustCompile(`^([A-Za-z0-9_-]+):([^=]|$)`)
	lines := strings.Split(string(b), "\n")
	var targets []string
	for i, line := range lines {
		m := rule.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		targets = append(targets, m[1])
		if i == 0 || !strings.HasPrefix(lines[i-1], "## "+m[1]+": ") {
			t.Errorf("Makefile target %s has no `## %s: what it does` line right above it", m[1], m[1])
		}
	}
	for _, want := range []string{"run", "test", "help", "rlsbench"} {
		if !strings.Contains(" "+strings.Join(targets, " ")+" ", " "+want+" ") {
			t.Errorf("no make %s (targets: %v)", want, targets)
		}
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	out, err := exec.Command("make", "-s", "help").Output()
	if err != nil {
		t.Fatalf("make help: %v", err)
	}
	for _, target := range targets {
		if !regexp.MustCompile(`(?m)^  make ` + regexp.QuoteMeta(target) + ` +\S`).Match(out) {
			t.Errorf("make help does not list %s:\n%s", target, out)
		}
	}
}
