package ratelimit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func limitYAML(n string) string {
	return "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: " + n + "}\n"
}

func writeConfig(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// remaining is the limit_remaining of one fresh hit of descriptor k=<v>.
func remaining(t *testing.T, ts *testService, v string) uint32 {
	t.Helper()
	return ts.call(t, request("d", "k="+v)).Statuses[0].LimitRemaining
}

func TestReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "limits.yaml")
	writeConfig(t, path, limitYAML("5"))
	ts := newTestService(t, "domain: d\n", func(c *ServiceConfig) { c.Path = dir })
	if err := ts.Reload(); err != nil {
		t.Fatal(err)
	}
	if r := remaining(t, ts, "a"); r != 4 {
		t.Fatalf("remaining %d after the first load, want 4", r)
	}
	writeConfig(t, path, limitYAML("5")+"    bogus: 1\n")
	err := ts.Reload()
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "limits.yaml:5:") {
		t.Errorf("bad reload error %v, want ErrInvalidConfig naming the file and line", err)
	}
	if r := remaining(t, ts, "b"); r != 4 {
		t.Errorf("remaining %d after a bad reload, want 4 (previous config kept)", r)
	}
	writeConfig(t, path, limitYAML("50"))
	if err := ts.Reload(); err != nil {
		t.Fatal(err)
	}
	if r := remaining(t, ts, "c"); r != 49 {
		t.Errorf("remaining %d after a good reload, want 49", r)
	}
	if got := ts.counter(t, "ratelimit_config_reloads_total", "result", "error"); got != 1 {
		t.Errorf("reload errors = %v, want 1", got)
	}
	if got := ts.counter(t, "ratelimit_config_reloads_total", "result", "success"); got != 2 {
		t.Errorf("reload successes = %v, want 2", got)
	}
	noPath := newTestService(t, "domain: d\n", nil)
	if err := noPath.Reload(); err == nil {
		t.Error("Reload without a path succeeded")
	}
}

func TestWatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "limits.yaml")
	writeConfig(t, path, limitYAML("5"))
	ts := newTestService(t, limitYAML("5"), func(c *ServiceConfig) { c.Path = dir })
	type result struct {
		reloaded bool
		err      error
	}
	ticks := make(chan time.Time)
	results := make(chan result)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() {
		stopped <- ts.watch(ctx, ticks, func(reloaded bool, err error) { results <- result{reloaded, err} })
	}()
	// tick lets the watcher poll once and returns what it did.
	tick := func() result {
		ticks <- time.Time{}
		return <-results
	}
	if r := tick(); r.reloaded {
		t.Fatalf("reloaded an unchanged config: %v", r.err)
	}
	writeConfig(t, path, limitYAML("500"))
	if r := tick(); !r.reloaded || r.err != nil {
		t.Fatalf("after a change: reloaded %v, %v", r.reloaded, r.err)
	}
	if r := remaining(t, ts, "a"); r != 499 {
		t.Errorf("remaining %d after the watched change, want 499", r)
	}
	writeConfig(t, path, "domain: [")
	if r := tick(); !r.reloaded || r.err == nil {
		t.Errorf("a broken file: reloaded %v, error %v; want a failed reload", r.reloaded, r.err)
	}
	if !strings.Contains(ts.logs.String(), "config reload failed; keeping the previous config") {
		t.Errorf("no log line for the failed reload:\n%s", ts.logs)
	}
	if r := remaining(t, ts, "b"); r != 499 {
		t.Errorf("remaining %d after a broken file, want 499", r)
	}
	cancel()
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Errorf("watch returned %v, want context.Canceled", err)
	}
	if err := ts.Watch(context.Background(), 0); err == nil {
		t.Error("Watch with a zero interval succeeded")
	}
}

// A directory emptied under a running service (a ConfigMap mount gone
// wrong) is a failed reload that keeps the limits, unless AllowEmpty.
func TestReloadEmptyDirectory(t *testing.T) {
	for name, allow := range map[string]bool{"refused": false, "allowed": true} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "limits.yaml")
			writeConfig(t, path, limitYAML("5"))
			ts := newTestService(t, "domain: d\n", func(c *ServiceConfig) { c.Path, c.AllowEmpty = dir, allow })
			if err := ts.Reload(); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			err := ts.Reload()
			if allow {
				if err != nil || len(ts.Config().Domains()) != 0 {
					t.Errorf("reload of an empty dir with AllowEmpty: %v, domains %v", err, ts.Config().Domains())
				}
				return
			}
			if !errors.Is(err, ErrEmptyConfig) {
				t.Errorf("reload of an empty dir: %v, want ErrEmptyConfig", err)
			}
			if r := remaining(t, ts, "a"); r != 4 {
				t.Errorf("remaining %d after an empty reload, want 4 (previous config kept)", r)
			}
		})
	}
}
