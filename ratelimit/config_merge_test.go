package ratelimit

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A second file for a domain is an error naming both files, unless
// LoadOptions.MergeDomains; merged, a descriptor defined in two files is
// still an error.
func TestLoadDomainsAcrossFiles(t *testing.T) {
	const (
		dA = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n"
		dB = "domain: d\ndescriptors:\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 2}\n"
		eA = "domain: e\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 3}\n"
		dk = "domain: d\ndescriptors:\n  - key: k\n"
	)
	hint := " (set ratelimit.merge_domains: true to merge)"
	for name, tc := range map[string]struct {
		files []File
		merge bool
		want  string // the whole error; "" for success
		rules int    // with want ""
	}{
		"distinct domains": {files: []File{{"a.yaml", []byte(dA)}, {"e.yaml", []byte(eA)}}, rules: 2},
		"second file for a domain": {files: []File{{"a.yaml", []byte(dA)}, {"b.yaml", []byte(dB)}},
			want: "ratelimit: invalid config:\n" + `domain "d" in b.yaml is already defined in a.yaml` + hint},
		"paths as given": {files: []File{{"rl/a.yaml", []byte(dA)}, {"rl/sub/b.yml", []byte(dB)}},
			want: "ratelimit: invalid config:\n" + `domain "d" in rl/sub/b.yml is already defined in rl/a.yaml` + hint},
		"a third file names the first": {
			files: []File{{"a.yaml", []byte(dA)}, {"b.yaml", []byte(dB)}, {"c.yaml", []byte("domain: d\n")}},
			want: "ratelimit: invalid config:\n" + `domain "d" in b.yaml is already defined in a.yaml` + hint + "\n" +
				`domain "d" in c.yaml is already defined in a.yaml` + hint},
		"with other errors of the file": {
			files: []File{{"a.yaml", []byte(dA)}, {"b.yaml", []byte("domain: d\nfoo: 1\n")}},
			want: "ratelimit: invalid config:\n" + `b.yaml:2:1: (top level): unknown key "foo" (want one of domain, descriptors)` + "\n" +
				`domain "d" in b.yaml is already defined in a.yaml` + hint},
		"merged": {files: []File{{"a.yaml", []byte(dA)}, {"b.yaml", []byte(dB)}, {"e.yaml", []byte(eA)}},
			merge: true, rules: 3},
		"merged: a descriptor in two files": {files: []File{{"a.yaml", []byte(dk)}, {"b.yaml", []byte(dk)}}, merge: true,
			want: "ratelimit: invalid config:\n" + `b.yaml:3: duplicate descriptor key "k" value "" (first defined at a.yaml:3)`},
		"merged: a top-level descriptor in two files with different children": {
			files: []File{
				{"a.yaml", []byte(dk + "    descriptors:\n      - key: x\n")},
				{"b.yaml", []byte(dk + "    descriptors:\n      - key: y\n")},
			}, merge: true,
			want: "ratelimit: invalid config:\n" + `b.yaml:3: duplicate descriptor key "k" value "" (first defined at a.yaml:3)`},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := LoadOptions{MergeDomains: tc.merge}.Load(tc.files...)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if n := len(c.Rules()); n != tc.rules {
					t.Errorf("%d rules, want %d", n, tc.rules)
				}
				return
			}
			if err == nil {
				t.Fatalf("Load succeeded, want\n%s", tc.want)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("error\n%s\nwant\n%s", got, tc.want)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v does not wrap ErrInvalidConfig", err)
			}
		})
	}
	// Load and LoadPath are the default options: no merging.
	if _, err := Load(File{"a.yaml", []byte(dA)}, File{"b.yaml", []byte(dB)}); err == nil {
		t.Error("Load merged two files of a domain")
	}
	dir := t.TempDir()
	writeConfig(t, filepath.Join(dir, "a.yaml"), dA)
	writeConfig(t, filepath.Join(dir, "b.yaml"), dB)
	want := "ratelimit: invalid config:\n" + `domain "d" in ` + filepath.Join(dir, "b.yaml") +
		" is already defined in " + filepath.Join(dir, "a.yaml") + hint
	if _, err := LoadPath(dir); err == nil || err.Error() != want {
		t.Errorf("LoadPath(dir) error\n%v\nwant\n%s", err, want)
	}
	if c, err := (LoadOptions{MergeDomains: true}).LoadPath(dir); err != nil || len(c.Rules()) != 2 {
		t.Errorf("merged LoadPath(dir) = %v, %v; want 2 rules", c.Rules(), err)
	}
}

// The reload loop keeps the previous config when a new file repeats a
// domain, and merges it with ServiceConfig.MergeDomains.
func TestWatchDuplicateDomain(t *testing.T) {
	for name, merge := range map[string]bool{"refused": false, "merged": true} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeConfig(t, filepath.Join(dir, "a.yaml"), limitYAML("5"))
			ts := newTestService(t, limitYAML("5"), func(c *ServiceConfig) { c.Path, c.MergeDomains = dir, merge })
			ticks := make(chan time.Time)
			type result struct {
				reloaded bool
				err      error
			}
			results := make(chan result)
			ctx, cancel := context.WithCancel(context.Background())
			stopped := make(chan error)
			go func() {
				stopped <- ts.watch(ctx, ticks, func(reloaded bool, err error) { results <- result{reloaded, err} })
			}()
			defer func() { cancel(); <-stopped }()
			ticks <- time.Time{} // the watcher has taken its first fingerprint
			if r := <-results; r.reloaded {
				t.Fatalf("reloaded an unchanged config: %v", r.err)
			}
			writeConfig(t, filepath.Join(dir, "b.yaml"),
				"domain: d\ndescriptors:\n  - key: other\n    rate_limit: {unit: minute, requests_per_unit: 7}\n")
			ticks <- time.Time{}
			r := <-results
			if !r.reloaded {
				t.Fatal("the new file was not noticed")
			}
			if merge {
				if r.err != nil {
					t.Fatalf("merged reload: %v", r.err)
				}
				if got := ts.call(t, request("d", "other=x")).Statuses[0].LimitRemaining; got != 6 {
					t.Errorf("remaining %d of the merged file's rule, want 6", got)
				}
				return
			}
			want := `domain "d" in ` + filepath.Join(dir, "b.yaml") + " is already defined in " + filepath.Join(dir, "a.yaml")
			if r.err == nil || !errors.Is(r.err, ErrInvalidConfig) || !strings.Contains(r.err.Error(), want) {
				t.Fatalf("reload error %v, want ErrInvalidConfig naming both files (%s)", r.err, want)
			}
			if !strings.Contains(ts.logs.String(), "config reload failed; keeping the previous config") {
				t.Errorf("no log line for the failed reload:\n%s", ts.logs)
			}
			if got := remaining(t, ts, "a"); got != 4 {
				t.Errorf("remaining %d after the refused reload, want 4 (previous config kept)", got)
			}
			if got := ts.call(t, request("d", "other=x")).Statuses[0]; got.CurrentLimit != nil {
				t.Errorf("the refused file's rule applies: %v", got)
			}
		})
	}
}
